"""Hypothesis drives a session with arbitrary interleavings; the invariants must hold.

The fake transport may also leave a start running past its timeout and let it
return (or fail) any time later, leave a stop running past its timeout, and the
operator may pause or stop connectors, send documents planned for another
incarnation or of another membership epoch. Half the sessions have a timing
budget (stop timeout and margin): for them, nothing may still run once the Lease
went unrenewed for ``lease - margin`` unless the session asked to end the process.
"""

import dataclasses

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from tests.sdk.session_helpers import BOTH, EAGER_ONLY, assignment

from kooper.protocol import member
from kooper.sdk import session as sdk_session

RESOURCES = ["A", "A-0", "A-1", "B", "B-0", "B-1"]
LEASE_MS = 1_000
STOP_TIMEOUT_MS = 300
MARGIN_MS = 100
DEADLINE_MS = LEASE_MS - MARGIN_MS


class SessionMachine(RuleBasedStateMachine):
    """A fake transport: runs actions one by one, in any order, failing some."""

    def __init__(self):
        super().__init__()
        self.session = None
        self.running: dict[str, int] = {}  # what the callbacks believe runs, with its epoch
        self.pending: list[sdk_session.Action] = []
        self.now = 0
        self.generation = 0
        self.accepted: list[int] = []
        self.reported_generations: list[int] = []
        self.target = None
        self.left_running: dict[str, sdk_session.Start] = {}  # timed out, callback goes on
        self.orphans: set[str] = set()  # started late: running, owned by nobody
        self.paused: set[str] = set()  # what the callbacks were told to hold paused
        self.budgeted = False
        self.last_renewal = 0  # when the session last took a renewal
        self.exited = False  # the session answered Exit: the process is gone
        self.member_epoch = 0  # the highest membership epoch accepted
        self.fenced_epoch = None  # the epoch the member fenced itself in, until a newer one

    @initialize(cooperative=st.booleans(), budgeted=st.booleans())
    def create(self, cooperative, budgeted):
        self.budgeted = budgeted
        self.session = sdk_session.Session(
            member_name="w-0",
            incarnation="x",
            protocols=BOTH if cooperative else EAGER_ONLY,
            lease_duration_ms=LEASE_MS,
            stop_timeout_ms=STOP_TIMEOUT_MS if budgeted else 0,
            fence_margin_ms=MARGIN_MS if budgeted else 0,
        )
        self.session.join(self.now)

    @rule(
        bump=st.integers(-2, 3),
        chosen=st.sets(st.sampled_from(RESOURCES)),
        revoke=st.sets(st.sampled_from(RESOURCES)),
        eager=st.booleans(),
        epoch=st.integers(0, 2),
        paused=st.dictionaries(st.sampled_from(["A", "B"]), st.sampled_from(["paused", "stopped"])),
        incarnation=st.sampled_from(["", "x", "x", "y"]),
        member_epoch=st.sampled_from([0, 1, 1, 2, 2, 3]),
    )
    def assign(self, bump, chosen, revoke, eager, epoch, paused, incarnation, member_epoch):  # noqa: PLR0917
        if self.exited:
            return
        self.generation = max(0, self.generation + bump)
        tasks = [r for r in chosen if "-" in r]
        connectors = [r for r in chosen if "-" not in r]
        revoked = revoke - chosen
        message = assignment(
            self.generation,
            connectors,
            tasks,
            revoked=([r for r in revoked if "-" not in r], [r for r in revoked if "-" in r]),
            protocol="eager" if eager else "compatible",
            epochs={r: epoch for r in chosen},
            states=paused,
            incarnation=incarnation,
        )
        message = dataclasses.replace(message, member_epoch=member_epoch)
        before = self.session.state
        fenced_at = self.fenced_epoch
        if self.session.receive_assignment(message):
            # Only the current membership's documents, or a newer one's; never, after
            # fencing, the epoch the member fenced in.
            assert not member_epoch or member_epoch >= self.member_epoch
            assert not member_epoch or fenced_at is None or member_epoch > fenced_at
            if member_epoch:
                self.member_epoch = member_epoch
                self.fenced_epoch = None
            assert incarnation in ("", "x"), "applied a document of another incarnation"
            assert not self.accepted or self.generation > self.accepted[-1]
            assert member.accepts_assignments(before)
            self.accepted.append(self.generation)
            self.target = message

    @rule()
    def fetch(self):
        batch = self.session.next_actions()
        if any(isinstance(action, sdk_session.Exit) for action in batch):
            assert batch == [sdk_session.Exit(self.session.exit_reason)]
            event("exit")
            self.exited = True  # the process ends here: nothing after it happens
            return
        if any(isinstance(action, sdk_session.Start) for action in batch):
            # Every stop the accepted target implies is done before anything starts,
            # and a fenced or leaving member starts nothing.
            assert self.session.state in member.LIVE_STATES
            assigned = self.target.assigned
            assert set(self.running) <= assigned.connectors | assigned.tasks
            assert not self.orphans
            starting = {a.resource for a in batch if isinstance(a, sdk_session.Start)}
            stopped = {c for c, state in self.target.states.items() if state == "stopped"}
            assert not {r.partition("-")[0] for r in starting} & stopped, "started a stopped one"
            assert not starting & set(self.left_running), "started while a start still runs"
        if self.session.state is member.MemberState.FENCED:
            assert all(a.lost for a in batch if isinstance(a, sdk_session.Stop))
        self.pending.extend(batch)

    @rule(data=st.data(), fail=st.booleans())
    @precondition(lambda self: self.pending)
    def complete_one(self, data, fail):
        if self.exited:
            return
        action = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        error = "boom" if fail and not isinstance(action, sdk_session.ReleaseLease) else None
        self.apply(action, error)

    @rule(data=st.data())
    @precondition(lambda self: not self.pending)
    def run_one_batch(self, data):
        """Timed-out starts may return first; then fetch one batch and finish all of it:
        each action succeeds, fails or hangs."""
        if self.exited:
            return
        for resource in sorted(set(self.left_running) - self.orphans):
            if self.pending:
                break
            late = data.draw(st.sampled_from(["not yet", "started", "failed"]))
            if late != "not yet":
                self.return_late(resource, started=late == "started")
        if self.pending:
            return
        self.fetch()
        batch, self.pending = self.pending, []
        for action in batch:
            outcome = data.draw(st.sampled_from(["hang", "ok", "fail", "ok"]))
            if isinstance(action, sdk_session.ReleaseLease) or outcome == "ok":
                self.apply(action, None)
            else:
                hang = outcome == "hang" and isinstance(
                    action, sdk_session.Start | sdk_session.Stop
                )
                self.apply(action, "timed out" if hang else "boom", still_running=hang)

    @rule(data=st.data())
    @precondition(lambda self: any(isinstance(a, sdk_session.Start) for a in self.pending))
    def a_start_times_out_and_goes_on(self, data):
        if self.exited:
            return
        starts = [a for a in self.pending if isinstance(a, sdk_session.Start)]
        action = data.draw(st.sampled_from(starts))
        self.pending.remove(action)
        self.apply(action, "timed out", still_running=True)

    def apply(self, action, error, *, still_running=False):
        resource = getattr(action, "resource", None)
        if isinstance(action, sdk_session.Start):
            assert resource not in self.running, "started twice without a stop"
            assert resource not in self.left_running, "started while a start still runs"
            if still_running:
                event("start left running")
                self.left_running[resource] = action
            elif error is None:
                self.running[resource] = action.epoch
        elif isinstance(action, sdk_session.Stop) and still_running:
            assert resource in self.running, "stopped something not running"
            event("stop left running")  # it still runs: the session must end the process
        elif isinstance(action, sdk_session.Stop):
            assert resource in self.running, "stopped something not running"
            assert action.cleanup == (resource in self.orphans)
            if action.cleanup:
                event("cleanup stop")
                assert action.lost
                self.orphans.discard(resource)
                del self.left_running[resource]
            del self.running[resource]
            self.paused.discard(resource)
        elif isinstance(action, sdk_session.Pause):
            assert resource in self.running
            assert resource not in self.orphans
            assert resource not in self.paused, "paused twice"
            self.paused.add(resource)
        elif isinstance(action, sdk_session.Resume):
            assert resource in self.paused, "resumed what was not paused"
            self.paused.discard(resource)
        elif isinstance(action, sdk_session.WriteReport):
            report = action.report
            if error is None:
                owned = set(self.running) - self.orphans
                assert set(report.owned.connectors | report.owned.tasks) == owned
                if self.reported_generations:
                    assert report.generation >= self.reported_generations[-1]
                self.reported_generations.append(report.generation)
                assert report.generation == -1 or report.generation in self.accepted
        self.session.done(action, error=error, still_running=still_running)

    @rule(data=st.data(), started=st.sampled_from([True, True, False]))
    @precondition(lambda self: set(self.left_running) - self.orphans)
    def late_start_returns(self, data, started):
        if self.exited:
            return
        resource = data.draw(st.sampled_from(sorted(set(self.left_running) - self.orphans)))
        self.return_late(resource, started=started)

    def return_late(self, resource, *, started):
        action = self.left_running[resource]
        event(f"late start returns, started={started}")
        handled = self.session.late_start_returned(action, error=None if started else "late boom")
        if not started:
            assert handled
            del self.left_running[resource]
        elif not handled:
            # Leaving or gone: the transport stops it itself, the session cannot.
            assert self.session.state in (member.MemberState.LEAVING, member.MemberState.LEFT)
            del self.left_running[resource]
        else:
            self.running[resource] = action.epoch
            self.orphans.add(resource)
            if not self.pending:
                # Nothing in flight: its stop is in the very next batch, unless that batch
                # ends the process (the timing budget already gave up on the late start).
                self.fetch()
                assert self.exited or any(
                    isinstance(a, sdk_session.Stop) and a.cleanup and a.resource == resource
                    for a in self.pending
                )

    @rule(ms=st.integers(0, 2 * LEASE_MS))
    def time_passes(self, ms):
        if self.exited:
            return
        self.now += ms
        live = self.session.state in member.LIVE_STATES
        self.session.tick(self.now)
        if live and self.session.state is member.MemberState.FENCED:
            self.fenced_epoch = self.member_epoch

    @rule()
    def renew(self):
        if self.exited:
            return
        if self.session.state not in (
            member.MemberState.UNJOINED,
            member.MemberState.LEAVING,
            member.MemberState.LEFT,
        ):
            self.last_renewal = self.now
        self.session.lease_renewed(self.now)

    @rule(dice=st.integers(0, 5))
    def sigterm(self, dice):
        if self.exited:
            return
        # One draw in six: a member that leaves early explores nothing else.
        if dice == 0:
            self.session.terminate()

    @rule()
    @precondition(lambda self: not self.pending)
    def settle(self):
        """Run to quiescence: fenced or leaving members then run nothing."""
        if self.exited:
            return
        while True:
            self.fetch()
            if not self.pending:
                break
            while self.pending:
                self.apply(self.pending.pop(0), None)
        if self.exited:
            return  # the process ended with something running: that is the point
        state = self.session.state
        assert not self.orphans, "a late start was left running unowned"
        if state in (member.MemberState.FENCED, member.MemberState.LEFT):
            assert self.running == {}
        if state is member.MemberState.LEFT:
            assert self.session.report().owned.tasks == frozenset()
        if state in member.LIVE_STATES:
            states = self.target.states if self.target else {}
            expected = {r for r in self.running if states.get(r.split("-")[0]) == "paused"}
            assert self.paused == expected
            assert self.session.paused == expected

    @invariant()
    def session_owns_what_the_callbacks_run_once_idle(self):
        if self.session is not None and not self.pending:
            assert set(self.session.owned) == set(self.running) - self.orphans
            assert set(self.session.left_running) == set(self.left_running)

    @invariant()
    def nothing_runs_when_the_lease_may_expire_unless_the_process_ends(self):
        if self.session is None or not self.budgeted or self.now - self.last_renewal < DEADLINE_MS:
            return
        if self.session.exit_reason is None:
            in_flight = [
                a for a in self.pending if isinstance(a, sdk_session.Start | sdk_session.Stop)
            ]
            assert not self.running, "still running past lease - margin"
            assert not self.left_running, "a start still running past lease - margin"
            assert not in_flight, "a callback still running past lease - margin"

    @invariant()
    def applied_generation_is_one_that_was_accepted(self):
        if self.session is not None and self.session.applied_generation != -1:
            assert self.session.applied_generation in self.accepted


SessionMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_session_state_machine = SessionMachine.TestCase
