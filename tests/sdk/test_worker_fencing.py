"""The blocking Worker fences on virtual time, while callbacks block (issue 12).

The Worker runs on a fake monotonic clock against the emulated API. The test turns
its loop itself (``step``), so no renewal happens unless the test sends one, and
waits on the callbacks' own events, never on wall-clock time. Defaults: a 30 s
lease, 10 s stop timeout, 2 s margin: fence at 18 s, nothing may run at 28 s.
"""

import threading

import pytest
from tests.sdk.worker_helpers import NS, POD, assign

from kooper.protocol import member, timing
from kooper.sdk import client, identity, kube

pytest.importorskip("kmock")

WAIT_S = 10.0
"""Only a bound on a hang: every wait below ends on an event."""


class Clock:
    def __init__(self):
        self.now = 1_000.0

    def __call__(self):
        return self.now


class Callbacks:
    """Records every callback; ``block`` makes one wait until the test releases it."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []
        self.entered: dict[tuple[str, str], threading.Event] = {}
        self.blocked: dict[tuple[str, str], threading.Event] = {}
        self.changed = threading.Condition()

    def block(self, name, resource):
        self.blocked[name, resource] = threading.Event()

    def release_all(self):
        for gate in self.blocked.values():
            gate.set()

    def _call(self, name, resource):
        with self.changed:
            self.calls.append((name, resource))
            self.changed.notify_all()
        gate = self.blocked.get((name, resource))
        if gate is not None:
            gate.wait(WAIT_S)

    def on_assigned(self, resource, config, epoch):
        self._call("on_assigned", resource)

    def on_revoked(self, resource):
        self._call("on_revoked", resource)

    def on_lost(self, resource):
        self._call("on_lost", resource)

    def called(self, name, resource):
        with self.changed:
            assert self.changed.wait_for(lambda: (name, resource) in self.calls, WAIT_S)


class Harness:
    def __init__(self, cluster, settings=None):
        self.clock = Clock()
        self.callbacks = Callbacks()
        self.exits: list[int] = []
        self.worker = client.Worker(
            api=kube.Api(cluster.url, timeout_s=2.0),
            identity=identity.Identity(pod=POD, namespace=NS, uid=cluster.pod_uid),
            on_assigned=self.callbacks.on_assigned,
            on_revoked=self.callbacks.on_revoked,
            on_lost=self.callbacks.on_lost,
            settings=settings or client.Settings(resync_interval_s=0.0),
            clock=self.clock,
            exit_process=self.exits.append,
        )
        self.worker.join()

    def turn_until(self, predicate, what):
        """Turn the loop until ``predicate()``; between turns, sleep on the loop's own
        wake-up event (set by finished callbacks), not on a timer. Before each turn the
        harness plays the re-read thread (no thread runs here: ``join`` only)."""
        for _ in range(1000):
            self.worker.watch.reread_once()
            self.worker.step()
            if predicate():
                return
            self.worker._wake.wait(WAIT_S)
            self.worker._wake.clear()
        raise AssertionError(f"never: {what}")

    def applied(self, generation):
        self.turn_until(lambda: self.worker.session.applied_generation == generation, "applied")


@pytest.fixture
def harness(api):
    made = []
    yield lambda **kw: made.append(Harness(api, **kw)) or made[-1]
    for one in made:
        one.callbacks.release_all()


def test_the_member_fences_while_a_start_blocks_and_stops_the_rest_at_once(api, harness):
    h = harness()
    assign(api, 1, [], ["A-0"])
    h.applied(1)
    h.callbacks.block("on_assigned", "A-1")
    assign(api, 2, [], ["A-0", "A-1"])
    h.turn_until(lambda: ("on_assigned", "A-1") in h.callbacks.calls, "A-1 starting")
    h.clock.now += 17.9
    h.worker.step()
    assert h.worker.session.state is member.MemberState.STABLE
    h.clock.now += 0.1  # 18 s since the last renewal was sent: fence
    h.worker.step()
    assert h.worker.session.state is member.MemberState.FENCED
    h.callbacks.called("on_lost", "A-0")  # while A-1's start still blocks
    assert ("on_lost", "A-1") not in h.callbacks.calls
    h.callbacks.blocked["on_assigned", "A-1"].set()
    h.turn_until(lambda: ("on_lost", "A-1") in h.callbacks.calls, "A-1 stopped as lost")
    h.turn_until(lambda: not h.worker.session.owned and h.worker.session.idle, "all stopped")
    h.clock.now += 60
    h.worker.step()
    assert h.exits == []


def test_a_stop_that_outlives_its_timeout_ends_the_process(api, harness):
    h = harness()
    assign(api, 1, [], ["A-0"])
    h.applied(1)
    h.callbacks.block("on_revoked", "A-0")
    assign(api, 2, [], [], revoked=([], ["A-0"]))
    h.turn_until(lambda: ("on_revoked", "A-0") in h.callbacks.calls, "the stop running")
    h.worker.keeper.renew(h.worker._owner)  # the Lease is fine: only the stop hangs
    h.clock.now += 9.9
    h.worker.step()
    assert h.exits == []
    h.clock.now += 0.1
    with pytest.raises(client.WorkerStuckError, match="stopping A-0 did not finish"):
        h.worker.step()
    assert h.exits == [client.STUCK_EXIT_CODE]
    assert h.worker.session.owned == {"A-0"}  # never reported as stopped
    assert not h.worker.live


def test_a_start_still_running_when_the_lease_may_expire_ends_the_process(api, harness):
    h = harness()
    h.callbacks.block("on_assigned", "A-0")
    assign(api, 1, [], ["A-0"])
    h.turn_until(lambda: ("on_assigned", "A-0") in h.callbacks.calls, "A-0 starting")
    h.clock.now += 18
    h.worker.step()  # fenced; nothing owned to stop yet
    assert h.exits == []
    h.clock.now += 10  # 28 s: the start has not returned (its timeout is 30 s)
    with pytest.raises(client.WorkerStuckError, match=r"may still run \(A-0\)"):
        h.worker.step()
    assert h.exits == [client.STUCK_EXIT_CODE]


def test_renewals_keep_the_member_unfenced(api, harness):
    h = harness()
    assign(api, 1, [], ["A-0"])
    h.applied(1)
    for _ in range(5):
        h.clock.now += 10
        assert h.worker.keeper.renew(h.worker._owner)
        h.worker.step()
    assert h.worker.session.state is member.MemberState.STABLE
    assert h.callbacks.calls == [("on_assigned", "A-0")]


def test_the_loop_sleeps_no_longer_than_the_next_fencing_decision(api, harness):
    h = harness(settings=client.Settings(tick_interval_s=60.0, resync_interval_s=0.0))
    h.worker.step()
    assert h.worker._sleep_s() == pytest.approx(18.0)
    h.clock.now += 15
    assert h.worker._sleep_s() == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"stop_timeout_s": 30.0}, "stop timeout 30s"),
        ({"lease_duration_s": 15}, "renew interval 10s"),
        ({"fence_margin_s": 0.0}, "fence margin must be positive"),
    ],
)
def test_settings_that_break_the_timing_budget_are_refused(changes, message):
    with pytest.raises(timing.TimingBudgetError, match=message):
        client.Settings(**changes)


def test_the_default_settings_fence_at_18_s():
    budget = client.Settings().budget
    assert (budget.fence_after_s, budget.deadline_s) == (18, 28)
