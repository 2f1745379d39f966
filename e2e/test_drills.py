"""The drills: each records an event log and checks the invariants.

The ones marked ``realk8s`` run on every ``make test`` against the real local control
plane (pods are local processes); all of them run on kind with ``make e2e``.

Every drill starts from the shipped examples (``Demo.baseline``) and ends balanced.
Logs land in out/e2e/<drill>.jsonl in the event-log schema, ready for ``kooper analyze``.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time

import pytest

from e2e import demo, invariants, tools
from kooper.core import events

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]
K = events.Kind

DELAY_MS = 30_000
TOLERANCE_MS = 3_000
"""Polling (0.5 s), the operator's reaction and clock skew between this host and the cluster."""


@pytest.fixture
def fresh(group):
    group.baseline()
    return group


def wait_for_leave(rec, member):
    """Until the recorder saw ``member`` go (so a wait for balance cannot pass before it)."""
    tools.wait_for(
        f"the recorder seeing {member} leave",
        lambda: rec.saw(lambda r: r.event is K.LEAVE and r.member == member),
        timeout_s=120,
        interval_s=0.2,
    )


def members_that(rows, kind):
    return {r.member for r in rows if r.event is kind}


def assert_clean(rows, expected):
    assert invariants.overlaps(rows) == [], "a resource ran on two members at once"
    assert invariants.not_running(rows, expected) == [], (
        "not everything runs exactly once at the end"
    )


@pytest.mark.realk8s
@pytest.mark.kind_tier
def test_rolling_restart_under_compatible_moves_work_off_running_members_only_to_rebalance(fresh):
    """Every pod restarts, so every member is disturbed once; outside its own restart a
    member stops work only to move it, and only the last pod's share moves that way.

    A terminating pod hands its work off at once (to the members already updated), so
    the pod that restarts last comes back empty and takes its share from the others once
    the roll is over: those are stops on members that are not restarting, and moves. A
    stop that restarts the resource in place (what eager does to everything) or drops
    it is a violation, and so is moving more than one member's share.
    """
    with fresh.record("rolling-compatible") as rec:
        fresh.k("rollout", "restart", f"statefulset/{demo.STATEFULSET}")
        fresh.rollout_status()
        fresh.wait_balanced(demo.REPLICAS)
    pods = {f"{demo.STATEFULSET}-{n}" for n in range(demo.REPLICAS)}
    assert members_that(rec.rows, K.LEAVE) == pods, "the log missed a pod's restart"
    assert_clean(rec.rows, fresh.expected())
    assert invariants.needless_stops(rec.rows, lead_ms=TOLERANCE_MS) == [], (
        "a member that was not restarting stopped work it then ran again, or dropped it"
    )
    share = math.ceil(len(fresh.expected()) / demo.REPLICAS)
    moved = invariants.stops_on_undisturbed_members(rec.rows, lead_ms=TOLERANCE_MS)
    assert len(moved) <= share, (
        f"{len(moved)} resources moved off members that were not restarting "
        f"(the last pod's share is {share}): {[(r.member, r.resource) for r in moved]}"
    )


@pytest.mark.realk8s
@pytest.mark.kind_tier
def test_rolling_restart_under_eager_then_the_analytics_report_compares_both(fresh):
    fresh.patch_group(protocol="eager")
    fresh.wait_balanced(demo.REPLICAS)
    with fresh.record("rolling-eager") as rec:
        fresh.k("rollout", "restart", f"statefulset/{demo.STATEFULSET}")
        fresh.rollout_status()
        fresh.wait_balanced(demo.REPLICAS)
    assert_clean(rec.rows, fresh.expected())
    logs = [demo.OUT / "rolling-compatible.jsonl", demo.OUT / "rolling-eager.jsonl"]
    present = [str(p) for p in logs if p.exists()]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kooper.cli",
            "analyze",
            *present,
            "--out",
            str(demo.OUT / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # conftest prints it at the end of the run, like `make demo` prints its table.
    (demo.OUT / "comparison.txt").write_text(done.stdout)
    assert (demo.OUT / "report" / "report.md").exists()


@pytest.mark.realk8s
@pytest.mark.parametrize("policy", [pytest.param("kooper", marks=pytest.mark.kind_tier), "kip415"])
def test_a_force_killed_worker_gets_its_work_back_only_as_the_policy_allows(fresh, policy):
    fresh.patch_group(policy=policy)
    victim = f"{demo.STATEFULSET}-1"
    grace_ms = DELAY_MS
    if policy == "kooper":
        # What the group learned from the earlier drills decides how long a killed pod's
        # work waits (status.adaptive, docs/operator.md "Unplanned departures"): the
        # delay while learning, 0 when moving at once is cheaper, else a shorter wait.
        knob = fresh.group_status().get("adaptive") or {}
        grace_ms = round(float(knob.get("graceSeconds", DELAY_MS / 1000)) * 1000)
        assert 0 <= grace_ms <= DELAY_MS
    with fresh.record(f"kill-{policy}") as rec:
        fresh.k("delete", "pod", victim, "--grace-period=0", "--force")
        wait_for_leave(rec, victim)
        fresh.wait_balanced(demo.REPLICAS, timeout_s=DELAY_MS / 1000 + 180)
    assert_clean(rec.rows, fresh.expected())
    early = invariants.early_reassignments(
        rec.rows,
        departed=victim,
        delay_ms=grace_ms,
        tolerance_ms=TOLERANCE_MS,
        same_member_ok=policy == "kooper",
    )
    assert early == [], "lost work started before its grace ran out"
    if policy == "kooper" and grace_ms == DELAY_MS:
        # Waiting for the pod disturbs nobody else. (Moving at once makes the others run
        # its work, and balancing takes some back from them when the pod returns: the
        # second handoff the adaptive rule counts.)
        assert (
            invariants.stops_on_undisturbed_members(rec.rows, settle_ms=5_000, lead_ms=TOLERANCE_MS)
            == []
        )


@pytest.mark.realk8s
def test_scale_up_spreads_work_and_scale_down_moves_nothing_off_the_remaining_members(fresh):
    added = {f"{demo.STATEFULSET}-{n}" for n in range(demo.REPLICAS, 6)}
    with fresh.record("scale-up") as up:
        fresh.scale(6)
        fresh.wait_balanced(6)
    assert members_that(up.rows, K.JOIN) >= added, "the log missed a new member"
    assert_clean(up.rows, fresh.expected())
    assert invariants.imbalance(up.rows) <= 1
    with fresh.record("scale-down") as down:
        fresh.scale(demo.REPLICAS)
        fresh.wait_balanced(demo.REPLICAS)
    assert members_that(down.rows, K.LEAVE) == added, "the log missed a departure"
    assert_clean(down.rows, fresh.expected())
    assert invariants.imbalance(down.rows) <= 1
    assert invariants.stops_on_undisturbed_members(down.rows, lead_ms=TOLERANCE_MS) == []


@pytest.mark.realk8s
def test_an_operator_restart_in_the_middle_of_a_delay_keeps_the_deadline(fresh):
    delay_ms = 60_000
    fresh.patch_group(policy="kip415", scheduledRebalanceMaxDelay="60s")
    victim = f"{demo.STATEFULSET}-2"
    with fresh.record("operator-restart") as rec:
        fresh.k("delete", "pod", victim, "--grace-period=0", "--force")
        status = tools.wait_for(
            "a pending delay in WorkerGroup.status",
            lambda: fresh.group_status().get("delay"),
            timeout_s=60,
        )
        deadline = status["deadline"]
        before = fresh.operator_pods()
        fresh.k("rollout", "restart", "deployment/kooper")
        fresh.rollout_status("deployment", "kooper")
        # Until balanced, note every pending deadline and who led when it was read.
        seen = set()

        def balanced_noting_the_deadline():
            leader = fresh.operator_leader().split("/")[0]
            pending = fresh.group_status().get("delay")
            if pending:
                seen.add((pending["deadline"], bool(leader) and leader not in before))
            return fresh.balanced(demo.REPLICAS)

        tools.wait_for("the lost work back after the delay", balanced_noting_the_deadline,
                       timeout_s=delay_ms / 1000 + 180, interval_s=2)
    assert (deadline, True) in seen, "no restarted replica led before the delay ran out"
    assert {d for d, _ in seen} == {deadline}, "the restarted operator moved the deadline"
    assert_clean(rec.rows, fresh.expected())
    early = invariants.early_reassignments(
        rec.rows,
        departed=victim,
        delay_ms=delay_ms,
        tolerance_ms=TOLERANCE_MS,
        same_member_ok=False,
    )
    assert early == [], "the restarted operator forgot the pending delay"


@pytest.mark.realk8s
def test_rolling_protocol_upgrade_from_eager_only_workers_to_compatible(fresh):
    with fresh.record("protocol-upgrade") as rec:
        fresh.set_worker_args([*demo.DEFAULT_ARGS, "--protocols", "eager"])
        fresh.rollout_status()
        fresh.wait_balanced(demo.REPLICAS)
        assert fresh.group_status().get("protocol") == "eager"
        fresh.set_worker_args(demo.DEFAULT_ARGS)
        fresh.rollout_status()
        fresh.wait_balanced(demo.REPLICAS)
        tools.wait_for(
            "the group back on the compatible protocol",
            lambda: fresh.group_status().get("protocol") == "compatible",
            timeout_s=120,
        )
    assert_clean(rec.rows, fresh.expected())


SLOW = "drill-slow"
"""A Connector whose resources take 3 s to stop (under the workers' 5 s stop timeout)."""


@pytest.mark.realk8s
def test_killing_the_leading_operator_mid_round_lets_the_standby_finish_it(fresh):
    """Issue 13: ``kill -9`` the leader between a join round's revocations and its assignment.

    Scaling to five members makes the leader revoke work from the four (the first half
    of a cooperative move). ``drill-slow``'s tasks take 3 s to stop, so once one of them
    is revoked the move stays in flight while the leader is killed; the standby must
    take over and assign the revoked work, once.

    The barrier is per member (docs/protocol.md): a member's revocations are handed out
    as soon as it acknowledges them, so what the members that stop at once gave up may
    have moved before the kill lands (on kind the kill is a ``crictl stop`` on the node,
    not a local ``kill``). What was in flight at the kill is what no ConfigMap assigned
    then: the slow member's share at least.
    """
    fresh.add_connector(SLOW, tasks=demo.REPLICAS + 1, type="sleep", **{"stop.ms": "3000"})
    fresh.wait_balanced(demo.REPLICAS)
    leader = fresh.operator_leader()
    assert leader, "no operator replica leads"
    joining = f"{demo.STATEFULSET}-{demo.REPLICAS}"

    def revoking_slow_work():
        revoked = {m: a for m, a in fresh.assignments().items() if a.revoked}
        slow = any(r.startswith(SLOW) for a in revoked.values() for r in a.revoked.sorted())
        return revoked if slow and all(a.leader == leader for a in revoked.values()) else None

    # Looked up first: the 3 s a slow task takes to stop must be room for the kill.
    kill_leader = fresh.container_killer(leader.split("/")[0])
    with fresh.record("leader-kill") as rec:
        fresh.scale(demo.REPLICAS + 1)
        revoked = tools.wait_for("the leader revoking a drill-slow task", revoking_slow_work,
                                 timeout_s=180, interval_s=0.2)
        kill_leader()
        killed_ms = int(time.time() * 1000)
        at_kill = fresh.assignments()  # the dead leader's last word
        successor = tools.wait_for(
            "a standby leading",
            lambda: (holder := fresh.operator_leader()) not in ("", leader) and holder,
            timeout_s=120,
        )
        fresh.wait_balanced(demo.REPLICAS + 1, timeout_s=300)
    assert_clean(rec.rows, fresh.expected())
    assert invariants.imbalance(rec.rows) <= 1
    # The round was in flight at the kill: some of what the leader revoked, a slow task
    # among it, no ConfigMap assigned yet; none of that had started anywhere, and it got
    # to the new member only in a round of the successor.
    moving = {r for a in revoked.values() for r in a.revoked.sorted()}
    in_flight = moving - {r for a in at_kill.values() for r in a.assigned.sorted()}
    assert any(r.startswith(SLOW) for r in in_flight), (
        "the round had finished before the leader was killed: every drill-slow task it "
        f"revoked was assigned again ({sorted(moving)} revoked, {sorted(in_flight)} not)")
    first_ms = rec.rows[0].ts_ms  # the first observation: what ran before the drill acted
    early = [r for r in rec.rows if r.event is K.START and r.resource in in_flight
             and first_ms < r.ts_ms < killed_ms]
    assert early == [], "work no ConfigMap assigned at the kill had started before it"
    arrived = {r.resource for r in rec.rows if r.event is K.START and r.member == joining}
    assert arrived & in_flight, f"none of the work in flight at the kill reached {joining}"
    assert fresh.assignments()[joining].leader == successor
