"""Issue 22, end to end: a leader frozen in the middle of a departure round, thawed after the
standby took over, must land none of its stale writes.

Real processes on the real control plane (e2e/leaders.py): two ``kooper run
--leader-election`` replicas, each through its own port of the fault proxy, and three
demo workers (policy kooper, compatible protocol, delay 0, member Lease 5 s). A worker
is SIGKILLed and its pod re-created under its name. A trap at the proxy catches the
leader's write of that member's ConfigMap in its departure round (a PUT: since a vanished
pod's member keeps its work until its fence budget ran out, docs/protocol.md, it leaves
and its next incarnation joins in one round; before that rule, the issue's runs, it was
a DELETE), SIGSTOPs the leader there and holds the write. Nothing here sleeps for a fixed time:
the test waits on events, polled from the API and the workers' rows, until the standby
leads (after the leader Lease, 15 s), has fenced (``status.leaderEpoch`` grew) and
the group is whole again with the victim's new incarnation running work. Then the
held write is released, its answer is in the frozen leader's socket, and the leader
is thawed: its round goes on with the plan it made before the freeze.

Without the fence (the parent of the fencing commit, trapping the DELETE it then sent;
2 runs of 2) the held DELETE, which carried no precondition then, landed (200) and
removed the ConfigMap the new term had just written for the new incarnation; the new
leader, finding it gone, moved that member's work elsewhere while the new incarnation
still ran it: overlaps of 144 and 172 ms at the same per-task epoch in the workers'
rows. With the fence: the held write answers 409 (the new term re-issued the ConfigMap
under its epoch), the old leader stands down and writes nothing more, and the workers'
rows (e2e/chaos_log.py) show no double ownership and nothing lost.

Release before SIGCONT, not after: the client's 30 s request timeout keeps running
while the process is stopped, and the API server, not the order in which the thawed
process's overdue timers fire, must decide the held write's fate.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from e2e import chaos_real, fault_proxy, leaders

pytestmark = [pytest.mark.chaos_real, pytest.mark.realk8s, pytest.mark.timeout(600)]

TRAPPED = "PUT"
"""The departure round's first write of the victim's ConfigMap, where the leader freezes."""

SETTINGS = chaos_real.Settings(pods=3, delay_s=0)
VICTIM = 1
TAKEOVER_S = 90
"""Bound of the waits around the freeze: the standby takes over once the Lease stood
still 15 s (read every 5 s), then fences, plans and the workers start."""
WRITES = leaders.WRITES


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the scenario saw, for the tests below."""

    old: str
    new: str
    epoch_before: int
    epoch_taken: int
    configmap_epochs: dict[str, int]
    victim_before: str
    victim_after: str
    started_while_frozen: set[str]
    trap: fault_proxy.Trap
    after_thaw: list[fault_proxy.Exchange]
    """The old leader's requests answered from the release on (the held write first)."""
    frozen_s: float
    """From the trap to the SIGCONT."""
    took_over_s: float
    """From the trap to when the Lease was seen held by the standby (at most)."""
    stood_down: list[str]
    """The old leader's log lines saying it stopped leading."""
    final_leader: str
    report: chaos_real.Report


@pytest.fixture(scope="module")
def outcome(cluster, tmp_path_factory) -> Outcome:
    workdir = tmp_path_factory.mktemp("stale-leader")
    with leaders.Replicas(SETTINGS, workdir, cluster=cluster) as h:
        h.wait_converged(after_ms=chaos_real.now_ms(), timeout_s=180)
        h.wait("a leader", h.leader, TAKEOVER_S)
        old = h.leader()
        [new] = [name for name in leaders.REPLICAS if name != old]
        epoch_before = h.status_epoch()
        victim_before = h.incarnation(VICTIM)
        proxy = h.real.proxy
        trap = proxy.trap(old, TRAPPED, f"/configmaps/kooper-{h.pod(VICTIM).name}",
                          on_trap=lambda: h.signal_operator(old, "sigstop"))
        started = chaos_real.now_ms()
        h.kill_worker(VICTIM)
        victim_after = h.incarnation(VICTIM)
        h.wait(f"{old} to send the {TRAPPED} of the victim's ConfigMap",
               trap.fired.is_set, TAKEOVER_S)
        h.wait(f"{new} to lead", lambda: h.leader() == new, TAKEOVER_S)
        took_over_ms = chaos_real.now_ms()
        h.wait(f"{victim_after} to start work and the group to be whole without {old}",
               lambda: bool(h.started(victim_after)) and h.whole(since_ms=started),
               TAKEOVER_S)
        epoch_taken = h.status_epoch()
        configmap_epochs = h.configmap_epochs()
        started_while_frozen = h.started(victim_after)
        released = len(proxy.history())
        trap.release()
        h.wait(f"the held {TRAPPED} to be answered", lambda: any(
            e.trapped for e in proxy.history()[released:]), TAKEOVER_S)
        h.signal_operator(old, "sigcont")
        ended = chaos_real.now_ms()
        h.wait(f"{old} to stand down", lambda: h.stood_down(old), TAKEOVER_S)
        converged = h.wait_converged(after_ms=ended)
        report = chaos_real.check(h, [chaos_real.Step("stale-leader", started, ended,
                                                      converged)])
        history = proxy.history()
        after_thaw = [e for e in history[released:] if e.client == old]
        with (workdir / "exchanges.jsonl").open("w") as out:  # for a reader of the run
            for index, e in enumerate(history):
                out.write(json.dumps({"after_release": index >= released,
                                      **dataclasses.asdict(e)}) + "\n")
        stood_down = [line for line in h.log_of(old).read_text().splitlines()
                      if any(phrase in line for phrase in leaders.STOOD_DOWN)]
        return Outcome(old=old, new=new, epoch_before=epoch_before, epoch_taken=epoch_taken,
                       configmap_epochs=configmap_epochs, victim_before=victim_before,
                       victim_after=victim_after, started_while_frozen=started_while_frozen,
                       trap=trap, after_thaw=after_thaw,
                       frozen_s=(ended - trap.fired_ms) / 1000,
                       took_over_s=(took_over_ms - trap.fired_ms) / 1000, stood_down=stood_down,
                       final_leader=h.leader(), report=report)


def describe(exchanges: list[fault_proxy.Exchange]) -> str:
    return "\n".join(f"{e.method} {e.path} -> {e.status}" for e in exchanges)


def test_the_leader_was_frozen_on_its_write_and_the_standby_took_over(outcome):
    assert outcome.trap.path.endswith(f"/configmaps/kooper-workers-{VICTIM}")
    assert outcome.new != outcome.old
    assert outcome.started_while_frozen, "the victim's new incarnation ran nothing"
    assert outcome.victim_after != outcome.victim_before


def test_the_new_term_fenced_before_the_thaw(outcome):
    # Its epoch is on the status and on every ConfigMap of the group.
    assert outcome.epoch_taken > outcome.epoch_before
    assert outcome.configmap_epochs
    assert set(outcome.configmap_epochs.values()) == {outcome.epoch_taken}


def test_the_held_write_was_refused_by_the_fence(outcome):
    [held] = [e for e in outcome.after_thaw if e.trapped]
    assert (held.method, held.status) == (TRAPPED, 409), describe(outcome.after_thaw)


def test_no_write_of_the_thawed_leader_landed(outcome):
    # Refused (409; a DELETE of something gone: 404) or never sent: none was 2xx.
    writes = [e for e in outcome.after_thaw if e.write and any(w in e.path for w in WRITES)]
    landed = [e for e in writes if 200 <= e.status < 300]
    assert landed == [], describe(writes)
    assert any(e.status == 409 for e in writes), describe(outcome.after_thaw)


def test_the_thawed_leader_stood_down_and_the_new_one_kept_the_lease(outcome):
    assert outcome.stood_down, "the thawed leader never logged that it stopped leading"
    assert outcome.final_leader == outcome.new


def test_no_resource_ran_on_two_workers_at_once(outcome):
    report = outcome.report
    assert report.overlaps == [], report.describe()


def test_nothing_is_lost_and_epochs_and_generations_only_grow(outcome):
    report = outcome.report
    assert (report.lost, report.unexpected) == ([], []), report.describe()
    assert report.epoch_regressions == [], report.describe()
    assert report.generation_regressions == [], report.describe()
    assert report.late == [], report.describe()


def test_the_old_leader_was_thawed_only_after_the_standby_took_over(outcome):
    # The Lease expires 15 s after its last renewal *before* the freeze, as the standby
    # saw it: the freeze itself may be shorter than the Lease.
    assert 0 < outcome.took_over_s <= outcome.frozen_s, (outcome.took_over_s, outcome.frozen_s)
