"""A worker node fails under its members: frozen (``docker pause``) or partitioned
(``docker network disconnect``). Kind only: the node is a container of its own.

Judged from the workers' own rows (``e2e/worker_rows.py``, one file per process on this
host), not from the operator or the API server:

* **partitioned**: the members on the node cannot renew their Leases, so each fences
  itself, stopping everything, before the operator's delay hands the work to the members
  on the other node. Any overlap is a violation: a running process that lost its Lease
  must have stopped first.
* **frozen**: a frozen process can neither renew nor fence, so when it thaws its tasks
  carry on for the instant before it notices. That overlap cannot be prevented by any
  lease (``chaos_log.while_frozen``); it is allowed only when the successor started
  while the member was frozen and at a higher per-task epoch, so anything the thawed
  process still does with the resource is fenced by the epoch. The thawed member must
  then stop (its fence, a ``stop`` row) and rejoin.

In both, StatefulSet pods stay bound to their node (nothing evicts them before the
not-ready toleration, 300 s), so the same processes come back when the node does, and
the group ends balanced over four members with every resource running exactly once.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from e2e import chaos_log, demo, tools, worker_rows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

MOVED_TIMEOUT_S = 240
"""Lease (15 s) + clock skew (5 s) + the delay (30 s at most) + the roll-call, with room."""


@pytest.fixture
def fresh(group):
    """The baseline, with the members spread over both worker nodes (a node that was
    NotReady when its pods were created, or evicted them, may leave them on one), and the
    two operator replicas on two nodes."""
    group.baseline()
    if len(member_pods_by_node(group)) < 2:
        group.k("rollout", "restart", f"statefulset/{demo.STATEFULSET}")
        group.rollout_status()
        group.wait_balanced(demo.REPLICAS)
    assert len(member_pods_by_node(group)) == 2, member_pods_by_node(group)
    if len(set(operator_nodes(group).values())) < 2:
        group.k("rollout", "restart", "deployment/kooper")
        group.k("rollout", "status", "deployment/kooper", "--timeout=300s", timeout=330)
    assert len(set(operator_nodes(group).values())) == 2, operator_nodes(group)
    tools.wait_for("an operator leader", group.operator_leader, timeout_s=120)
    return group


def now_ms() -> int:
    return int(time.time() * 1000)


def member_pods_by_node(g: demo.Demo) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pod in g.json("pods")["items"]:
        if demo.is_member_pod(pod) and pod["spec"].get("nodeName"):
            out.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
    return out


def operator_nodes(g: demo.Demo) -> dict[str, str]:
    """Operator pod → its node."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in g.json("pods", "-l", "app.kubernetes.io/component=operator")["items"]
            if not p["metadata"].get("deletionTimestamp")}


def leader_node(g: demo.Demo) -> str:
    leader_pod = g.operator_leader().split("/", 1)[0]
    return operator_nodes(g).get(leader_pod, "")


def node_to_fail(g: demo.Demo, *, leader: bool = False) -> str:
    """A worker node that hosts members: the leading operator's (``leader``), or one
    without it (the member-only drills)."""
    lead = leader_node(g)
    candidates = sorted(n for n in member_pods_by_node(g) if (n == lead) == leader)
    assert candidates, f"no member node {'with' if leader else 'without'} the leader ({lead})"
    return candidates[0]


def node_ready(g: demo.Demo, node: str) -> bool:
    status = json.loads(g.kube.kubectl("get", "node", node, "-o", "json"))["status"]
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    return bool(ready) and ready[0]["status"] == "True"


def runs_since(g: demo.Demo, start_ms: int, processes: list[chaos_log.ProcessRow],
               current: set[str]) -> list[chaos_log.Run]:
    """The runs of the incarnations that ran at ``start_ms`` (``current``) or began later."""
    assert g.kube.events_dir is not None
    return worker_rows.runs_since(g.kube.events_dir, g.ns, start_ms, current, processes)


def moved_off(g: demo.Demo, failed: set[str], start_ms: int, expected: set[str], *,
              processes: list[chaos_log.ProcessRow], current: set[str]) -> bool:
    """Every resource runs on some incarnation off the failed node (by its own rows)."""
    running = chaos_log.running_at(runs_since(g, start_ms, processes, current), now_ms())
    return all(any(run.incarnation not in failed for run in running.get(resource, ()))
               for resource in expected)


FAULTS = {
    # how: (fail, heal, whether the node's processes are frozen meanwhile)
    "partition": (["docker", "network", "disconnect", "kind"],
                  ["docker", "network", "connect", "kind"], False),
    "freeze": (["docker", "pause"], ["docker", "unpause"], True),
}


def pod_of(incarnation: str) -> str:
    return incarnation.split(".", 1)[0]


def fail_node(g: demo.Demo, drill: str, how: str, *, leader: bool = False) -> tuple[
        list[chaos_log.Run], list[chaos_log.ProcessRow], set[str], int]:
    """Fail a node as ``FAULTS[how]`` says (the leading operator's, with ``leader``), wait
    until its work runs elsewhere (and, with ``leader``, the standby leads under a newer
    epoch) and the node is NotReady, heal it, wait until the group is whole again.
    Returns the runs, the process rows, the failed node's incarnations and the heal time."""
    fail, heal, frozen = FAULTS[how]
    node = node_to_fail(g, leader=leader)
    old_leader = g.operator_leader()
    old_epoch = int(g.group_status().get("leaderEpoch") or 0)
    on_node = member_pods_by_node(g)[node]
    assert g.kube.events_dir is not None
    pods = [p["metadata"]["name"] for p in g.json("pods")["items"] if demo.is_member_pod(p)]
    current = set(worker_rows.latest(g.kube.events_dir, g.ns, pods).values())
    failed = {i for i in current if pod_of(i) in on_node}
    assert len(failed) == len(on_node), f"no events file for some of {on_node}"
    containers = {i: container_of(g, pod_of(i)) for i in failed}
    expected = g.expected()
    processes: list[chaos_log.ProcessRow] = []
    start = now_ms()
    healed = 0
    with g.record(drill):
        tools.run(*fail, node)
        try:
            if frozen:
                processes += [chaos_log.ProcessRow(start, i, pod_of(i), "freeze") for i in failed]
            if leader:
                tools.wait_for("the standby to lead under a newer epoch", lambda: (
                    g.operator_leader() not in ("", old_leader)
                    and int(g.group_status().get("leaderEpoch") or 0) > old_epoch),
                    timeout_s=MOVED_TIMEOUT_S, interval_s=0.5)
            tools.wait_for(f"the work of {', '.join(on_node)} running off {node}",
                           lambda: moved_off(g, failed, start, expected,
                                             processes=processes, current=current),
                           timeout_s=MOVED_TIMEOUT_S, interval_s=0.5)
            tools.wait_for(f"{node} NotReady", lambda: not node_ready(g, node), timeout_s=180)
        finally:
            healed = now_ms()
            tools.run(*heal, node)  # whatever failed above, the next drill gets the node back
            if not frozen:  # a reconnected node may come back with another IP
                tools.run("bash", str(tools.KIND / "cluster.sh"), "routes",
                          g.kube.context.removeprefix("kind-"))
        if frozen:
            processes += [chaos_log.ProcessRow(healed, i, pod_of(i), "thaw") for i in failed]
        tools.wait_for(f"{node} Ready again", lambda: node_ready(g, node), timeout_s=300)
        g.wait_balanced(demo.REPLICAS, timeout_s=300)
    processes += runtime_exits(node, containers)
    return runs_since(g, start, processes, current), processes, failed, healed


def runtime_exits(node: str, containers: dict[str, str]) -> list[chaos_log.ProcessRow]:
    """An ``exit`` row for each incarnation (-> its container on ``node``) that ended, at
    its runtime's ``finishedAt``.

    A thawed member ends its process (exit 3); its pod's next container bounds that exit
    too (``worker_rows.exits``), but only as late as the kubelet restarts it, seconds
    after a thaw; an overlap with a successor that started in between would be the
    bound's, not the process's."""
    return [chaos_log.ProcessRow(exited, incarnation, pod_of(incarnation), "exit")
            for incarnation, container in sorted(containers.items())
            if (exited := exited_at_ms(node, container)) is not None]


@pytest.mark.kind_tier
def test_a_partitioned_node_s_members_fence_before_their_work_starts_elsewhere(fresh):
    runs, processes, failed, _ = fail_node(fresh, "node-partitioned", "partition")
    overlaps = chaos_log.overlaps(runs, processes)
    assert overlaps == [], "\n".join(o.describe() for o in overlaps)
    assert chaos_log.epoch_regressions(runs) == []
    fenced = [r for r in runs if r.incarnation in failed and r.ended_by == "stop"]
    assert fenced, "the partitioned members' fence left no stop row"
    assert chaos_log.lost(runs, fresh.expected()) == []


@pytest.mark.kind_tier
def test_a_frozen_node_s_work_moves_fenced_by_epoch_and_the_thawed_members_stop_it(fresh):
    runs, processes, failed, thawed = fail_node(fresh, "node-frozen", "freeze")
    # A thawed member whose Lease went unrenewed while it may still run work ends its
    # process (exit 3, docs/sdk.md); its container restarts in the same pod.
    overlaps = chaos_log.overlaps(runs, processes)
    unfenced = [o for o in overlaps if not chaos_log.while_frozen(o, processes)]
    assert unfenced == [], "\n".join(o.describe() for o in unfenced)
    assert chaos_log.epoch_regressions(runs) == []
    # What the frozen members ran when frozen and lost meanwhile, they stopped or ended
    # with their process once thawed (their fence): nothing a successor took over is
    # left running on them.
    frozen_at = min(p.ts_ms for p in processes if p.what == "freeze")
    taken = {o.first.resource for o in overlaps}
    frozen_runs = [r for r in runs if r.incarnation in failed and r.resource in taken
                   and r.start_ms <= frozen_at < r.end_ms]
    assert frozen_runs, "no work of the frozen members was taken over"
    assert all(r.ended_by in ("stop", "exit") and r.end_ms >= thawed for r in frozen_runs), (
        frozen_runs)
    ended = sorted(p.ts_ms - thawed for p in processes
                   if p.what == "exit" and p.incarnation in failed)
    print(f"node-frozen: {len(overlaps)} overlaps with a frozen member, all fenced by epoch; "
          f"the thawed processes ended {ended} ms after the thaw (their runtime's finishedAt)")
    assert chaos_log.lost(runs, fresh.expected()) == []


@pytest.mark.kind_tier
def test_the_leader_s_node_frozen_its_late_writes_are_fenced_and_nothing_runs_twice(fresh):
    """The leading operator's node frozen (``docker pause``) with members on it: the
    standby takes over under a newer epoch and moves the work; the thawed leader resumes
    mid-round, and whatever it still writes is refused (docs/protocol.md, "Fencing the
    leader"): the only overlaps are with the frozen members' own tasks (fenced by epoch),
    none between members the old leader could still write to."""
    runs, processes, _, _ = fail_node(fresh, "leader-node-frozen", "freeze", leader=True)
    overlaps = chaos_log.overlaps(runs, processes)
    unfenced = [o for o in overlaps if not chaos_log.while_frozen(o, processes)]
    assert unfenced == [], "\n".join(o.describe() for o in unfenced)
    assert chaos_log.epoch_regressions(runs) == []
    assert chaos_log.lost(runs, fresh.expected()) == []


def test_the_leader_s_node_partitioned_the_standby_leads_and_nothing_runs_twice(fresh):
    """The leading operator's node cut off the network with members on it: they fence,
    the standby leads under a newer epoch and moves their work; the old leader, back,
    stands by."""
    runs, processes, _, _ = fail_node(fresh, "leader-node-partitioned", "partition",
                                           leader=True)
    overlaps = chaos_log.overlaps(runs, processes)
    assert overlaps == [], "\n".join(o.describe() for o in overlaps)
    assert chaos_log.epoch_regressions(runs) == []
    assert chaos_log.lost(runs, fresh.expected()) == []


def pod_node(g: demo.Demo, pod: str) -> str:
    """The node of ``pod`` once it runs ("" before, or when it is gone)."""
    found = json.loads(g.k("get", "pod", pod, "-o", "json", "--ignore-not-found") or "{}")
    running = (found.get("status") or {}).get("phase") == "Running"
    return str((found.get("spec") or {}).get("nodeName") or "") if running else ""


def container_of(g: demo.Demo, pod: str) -> str:
    """The container id of ``pod``'s worker (``containerd://<id>`` without the scheme)."""
    status = g.json("pod", pod)["status"]["containerStatuses"][0]
    return str(status["containerID"]).partition("://")[2]


def exited_at_ms(node: str, container: str) -> int | None:
    """When ``container``'s process on ``node`` ended: containerd's ``finishedAt`` once it
    exited, now once it is removed (both upper bounds), None while it runs.

    The node's runtime tells the drills what ``waitpid`` tells the real-process harness:
    a force-deleted pod's process has no later container of its pod to bound its exit
    (``worker_rows.exits``), and a restarted one's bound comes seconds late."""
    try:
        out = tools.run("docker", "exec", node, "crictl", "inspect", "-o", "json", container,
                        timeout=30)
    except subprocess.CalledProcessError as exc:
        if "not found" in str(exc.stderr).lower():
            return now_ms()
        raise
    status = json.loads(out).get("status") or {}
    if status.get("state") != "CONTAINER_EXITED":
        return None
    return worker_rows.rfc3339_ms(str(status["finishedAt"]))


def test_a_member_force_deleted_on_a_frozen_node_comes_back_elsewhere_and_nothing_runs_twice(
        fresh):
    """What an admin does for a StatefulSet pod on an unreachable node: ``kubectl delete
    pod --force --grace-period=0`` while its process is frozen (``docker pause``), not
    stopped. The StatefulSet re-creates the pod under its name on the other node at once;
    a gone pod is not a stopped process (docs/protocol.md), so the new incarnation gets
    nothing of the old one's work before the old one's fence budget ran out: every
    overlap is with a frozen process, whose successor started while it was frozen at a
    higher per-task epoch. Thawed, the old process finds its Lease lost and ends; its
    kubelet removes the deleted pod's container."""
    g = fresh
    node = node_to_fail(g)
    on_node = member_pods_by_node(g)[node]
    victim = sorted(on_node)[0]
    assert g.kube.events_dir is not None
    pods = [p["metadata"]["name"] for p in g.json("pods")["items"] if demo.is_member_pod(p)]
    current = set(worker_rows.latest(g.kube.events_dir, g.ns, pods).values())
    failed = {i for i in current if pod_of(i) in on_node}
    [old] = [i for i in failed if pod_of(i) == victim]
    container = container_of(g, victim)
    expected = g.expected()
    start = now_ms()
    processes = [chaos_log.ProcessRow(start, i, pod_of(i), "freeze") for i in failed]
    with g.record("member-force-deleted"):
        tools.run("docker", "pause", node)
        try:
            tools.wait_for(f"{node} NotReady", lambda: not node_ready(g, node), timeout_s=180)
            g.k("delete", "pod", victim, "--force", "--grace-period=0")
            tools.wait_for(f"{victim} re-created and running off {node}",
                           lambda: pod_node(g, victim) not in ("", node),
                           timeout_s=MOVED_TIMEOUT_S)
            tools.wait_for(f"the work of {', '.join(on_node)} running off {node}",
                           lambda: moved_off(g, failed, start, expected,
                                             processes=processes, current=current),
                           timeout_s=MOVED_TIMEOUT_S, interval_s=0.5)
        finally:
            healed = now_ms()
            tools.run("docker", "unpause", node)
        processes += [chaos_log.ProcessRow(healed, i, pod_of(i), "thaw") for i in failed]
        exited = tools.wait_for(f"{victim}'s old process to end", lambda: exited_at_ms(
            node, container), timeout_s=120, interval_s=0.2)
        processes.append(chaos_log.ProcessRow(exited, old, victim, "exit"))
        tools.wait_for(f"{node} Ready again", lambda: node_ready(g, node), timeout_s=300)
        g.wait_balanced(demo.REPLICAS, timeout_s=300)
    runs = runs_since(g, start, processes, current)
    overlaps = chaos_log.overlaps(runs, processes)
    unfenced = [o for o in overlaps if not chaos_log.while_frozen(o, processes)]
    assert unfenced == [], "\n".join(o.describe() for o in unfenced)
    assert chaos_log.epoch_regressions(runs) == []
    reborn = {r.incarnation for r in runs if r.pod == victim and r.incarnation not in failed}
    assert reborn, f"{victim}'s new incarnation ran nothing"
    assert chaos_log.lost(runs, expected) == []


def test_the_control_plane_restarted_under_the_group_nothing_runs_twice(fresh):
    """The control-plane node's container restarted (``docker restart``): the API server
    and etcd down together, every watch broken, every Lease unrenewable. The members fence
    themselves (they cannot renew), the operator's replicas lose and retake their Lease;
    once the API is back the group rejoins and ends balanced, and no resource ran on two
    members at once at any time (the workers' rows)."""
    g = fresh
    name = g.kube.context.removeprefix("kind-")
    assert g.kube.events_dir is not None
    pods = [p["metadata"]["name"] for p in g.json("pods")["items"] if demo.is_member_pod(p)]
    current = set(worker_rows.latest(g.kube.events_dir, g.ns, pods).values())
    expected = g.expected()
    start = now_ms()

    def api_up() -> bool:
        try:
            g.kube.kubectl("get", "--raw", "/readyz", timeout=10)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return False
        return True

    with g.record("control-plane-restarted"):
        tools.run("docker", "restart", f"{name}-control-plane", timeout=300)
        tools.wait_for("the API server back", api_up, timeout_s=300)
        tools.run("bash", str(tools.KIND / "cluster.sh"), "routes", name)
        nodes = [n["metadata"]["name"] for n in json.loads(
            g.kube.kubectl("get", "nodes", "-o", "json"))["items"]]
        tools.wait_for("every node Ready", lambda: all(node_ready(g, n) for n in nodes),
                       timeout_s=300)
        g.wait_balanced(demo.REPLICAS, timeout_s=300)
    runs = runs_since(g, start, [], current)
    overlaps = chaos_log.overlaps(runs, [])
    assert overlaps == [], "\n".join(o.describe() for o in overlaps)
    assert chaos_log.epoch_regressions(runs) == []
    assert chaos_log.lost(runs, expected) == []
