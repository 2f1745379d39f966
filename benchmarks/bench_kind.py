"""The headline on real kubelets (issue 20): a StatefulSet of 8 demo workers on kind,
3 connectors x 10 tasks (33 resources), ``kubectl rollout restart``, under
compatible/kooper and under eager, in one run on one cluster.

Measured from the workers' own rows (``--events-dir``, e2e/worker_rows.py), over the
window from the restart command to the group balanced again after the roll:

* total pause: for every resource, the time no worker ran it, summed;
* handoffs: a resource's stop on one worker process to its start on another, with the
  mean gap (the handoff time) and how many per resource;
* moves: handoffs to another pod (a restart comes back under the same pod name).

    .venv/bin/python benchmarks/bench_kind.py      # builds/reuses everything as make e2e does
    KOOPER_E2E_CLUSTER=kooper-e2e ...    # on an existing cluster (hack/kind/cluster.sh up)
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from e2e import chaos_log, demo, kind, worker_rows  # noqa: E402

PODS = 8
TASKS = 10
CONNECTORS = ("orders-source", "payments-source", "warehouse-sink")


def now_ms() -> int:
    return int(time.time() * 1000)


def measure(runs: list[chaos_log.Run], expected: set[str], t0: int, t1: int) -> dict[str, float]:
    pause = 0
    gaps: list[int] = []
    moves = 0
    for resource in expected:
        mine = sorted((r for r in runs if r.resource == resource and r.end_ms > t0
                       and r.start_ms < t1), key=lambda r: r.start_ms)
        covered, cursor = 0, t0
        for run in mine:
            start, end = max(run.start_ms, cursor), min(run.end_ms, t1)
            if end > start:
                covered += end - start
                cursor = end
        pause += (t1 - t0) - covered
        for a, b in itertools.pairwise(mine):
            if a.incarnation != b.incarnation and a.end_ms <= b.start_ms and a.end_ms >= t0:
                gaps.append(b.start_ms - a.end_ms)
                moves += a.pod != b.pod
    return {"pause_s": pause / 1000, "handoffs": len(gaps) / len(expected),
            "handoff_ms": statistics.mean(gaps) if gaps else 0.0,
            "moves": moves / len(expected), "roll_s": (t1 - t0) / 1000}


def roll(g: demo.Demo, protocol: str) -> dict[str, float]:
    g.patch_group(protocol=protocol)
    g.wait_balanced(PODS, timeout_s=600)
    print(f"bench_kind: rolling {PODS} pods under {protocol}", file=sys.stderr, flush=True)
    assert g.kube.events_dir is not None
    pods = [p["metadata"]["name"] for p in g.json("pods")["items"] if demo.is_member_pod(p)]
    current = set(worker_rows.latest(g.kube.events_dir, g.ns, pods).values())
    t0 = now_ms()
    g.k("rollout", "restart", f"statefulset/{demo.STATEFULSET}")
    g.rollout_status()
    g.wait_balanced(PODS, timeout_s=600)
    t1 = now_ms()
    runs = worker_rows.runs_since(g.kube.events_dir, g.ns, t0, current)
    overlaps = chaos_log.overlaps(runs)
    assert not overlaps, "\n".join(o.describe() for o in overlaps)
    return measure(runs, g.expected(), t0, t1)


def main() -> int:
    with kind.cluster("kooper-bench") as kube:
        g = demo.Demo(kube, kind.NAMESPACE)
        g.apply_examples()
        for connector in CONNECTORS:
            g.k("patch", "connector", connector, "--type", "merge",
                "-p", json.dumps({"spec": {"tasksMax": TASKS}}))
        g.scale(PODS)
        g.rollout_status()
        try:
            results = {protocol: roll(g, protocol) for protocol in ("compatible", "eager")}
        finally:  # a reused cluster goes back to the examples the drills expect
            if os.environ.get("KOOPER_E2E_CLUSTER"):
                g.baseline()  # applies examples/ again: tasksMax and replicas as shipped
    print(f"kind, StatefulSet of {PODS} pods, {len(CONNECTORS)} connectors x {TASKS} tasks, "
          "kubectl rollout restart (policy kooper)")
    print(f"{'protocol':<11} {'roll s':>7} {'pause s':>8} {'handoffs/res':>13} "
          f"{'handoff ms':>11} {'moves/res':>10}")
    for protocol, r in results.items():
        print(f"{protocol:<11} {r['roll_s']:>7.1f} {r['pause_s']:>8.1f} {r['handoffs']:>13.2f} "
              f"{r['handoff_ms']:>11.0f} {r['moves']:>10.2f}")
    ratio = results["compatible"]["pause_s"] / max(results["eager"]["pause_s"], 1e-9)
    print(f"total task pause, compatible / eager: {ratio:.3f} (target <= 0.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
