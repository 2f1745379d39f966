"""The operator at scale against the emulated cluster: 1,000 members, 100,000 tasks.

    .venv/bin/python benchmarks/bench_operator.py [--members 1000] [--tasks 100000]

What it measures (printed, not asserted):

* departure → written: a member's pod and Lease are deleted (``delay 0s``, so its
  work moves at once); the clock stops when the WorkerGroup status shows the new
  generation, which the operator writes *after* every changed ConfigMap. So this
  is an upper bound of "departure to all changed ConfigMaps written", including
  the watch delivery of the deletion to kopf and the status patch.
* join → written: a new member's Lease appears; the round revokes for balance.
* API writes per round, by kind: only members whose assignment changed get a
  ConfigMap write.

Workers are played in bulk: after each round, every member whose ConfigMap has a
new generation applies it and reports (one Lease patch each).
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import statistics
import sys
import time
import uuid

import kopf

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))

from kooper.core import model  # noqa: E402
from kooper.protocol import codec, messages  # noqa: E402
from kooper.shell import handlers, settings  # noqa: E402
from kooper.testing import cluster, kopfthread  # noqa: E402

NS = "default"
LEASES = "coordination.k8s.io/v1/leases"


def now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Workers:
    def __init__(self, emulated: cluster.EmulatedCluster) -> None:
        self.emulated = emulated
        self.state: dict[str, tuple[str, int, model.ConnectorsAndTasks]] = {}

    def report(self, name: str) -> str:
        incarnation, generation, owned = self.state[name]
        return codec.encode_report(messages.Report(
            member=name, incarnation=incarnation,
            protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
            generation=generation, owned=owned))

    def add(self, name: str) -> None:
        self.state[name] = (uuid.uuid4().hex[:8], -1, model.EMPTY)
        pod = self.emulated.create("pods", {"metadata": {"name": name,
                                                         "labels": {"app": "bench"}}},
                                   namespace=NS)
        self.emulated.create(LEASES, {
            "metadata": {"name": f"kooper-{name}", "labels": {"kooper.dev/member": name},
                         "annotations": {messages.REPORT_ANNOTATION: self.report(name)},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                              "uid": pod["metadata"]["uid"]}]},
            "spec": {"holderIdentity": f"{name}/{self.state[name][0]}",
                     "leaseDurationSeconds": 3600, "renewTime": now_micro()},
        }, namespace=NS)

    def remove(self, name: str) -> None:
        self.state.pop(name)
        self.emulated.delete("pods", name, namespace=NS)
        self.emulated.delete(LEASES, f"kooper-{name}", namespace=NS)

    def apply_all(self) -> int:
        """Every member applies its ConfigMap if it has a new generation; returns how many."""
        applied = 0
        for cm in self.emulated.list("configmaps", namespace=NS,
                                     label_selector="kooper.dev/group=bench"):
            name = cm["metadata"]["labels"]["kooper.dev/member"]
            if name not in self.state:
                continue
            doc = codec.decode_assignment(cm["data"][messages.CONFIGMAP_KEY])
            incarnation, generation, owned = self.state[name]
            if doc.generation != generation or doc.assigned != owned:
                self.state[name] = (incarnation, doc.generation, doc.assigned)
                self.emulated.patch(LEASES, f"kooper-{name}", {"metadata": {"annotations": {
                    messages.REPORT_ANNOTATION: self.report(name)}}}, namespace=NS)
                applied += 1
        return applied


def status(emulated: cluster.EmulatedCluster) -> dict:
    return (emulated.get("workergroups", "bench", namespace=NS) or {}).get("status") or {}


def wait_generation_above(emulated: cluster.EmulatedCluster, generation: int,
                          timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if status(emulated).get("rebalanceGeneration", 0) > generation:
            return time.monotonic()
        time.sleep(0.002)
    raise TimeoutError(f"generation stayed at {generation}")


def converge(emulated: cluster.EmulatedCluster, workers: Workers, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        time.sleep(0.3)
        applied = workers.apply_all()
        s = status(emulated)
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in s.get("conditions") or ())
        quiet = quiet + 1 if applied == 0 and ready else 0
        if quiet >= 2:
            return
    raise TimeoutError("the group did not converge")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--tasks-per-connector", type=int, default=100)
    parser.add_argument("--departures", type=int, default=20)
    parser.add_argument("--joins", type=int, default=10)
    args = parser.parse_args()

    with cluster.EmulatedCluster(crds=sorted((ROOT / "crds").glob("*.yaml")),
                                 history_limit=200_000) as emulated:
        emulated.create("workergroups", {"metadata": {"name": "bench"}, "spec": {
            "selector": {"matchLabels": {"app": "bench"}}, "scheduledRebalanceMaxDelay": "0s",
            "leaseDurationSeconds": 3600}}, namespace=NS)
        connectors = args.tasks // args.tasks_per_connector
        for n in range(connectors):
            emulated.create("connectors", {"metadata": {"name": f"c{n:05d}"}, "spec": {
                "workerGroup": "bench", "tasksMax": args.tasks_per_connector,
                "config": {"topic": f"t{n}"}}}, namespace=NS)
        workers = Workers(emulated)
        for n in range(args.members):
            workers.add(f"w-{n:04d}")

        config = settings.Config(kube_api=emulated.url, identity="bench", debounce_s=0.05)
        registry = kopf.OperatorRegistry()
        handlers.register(registry, login=False)
        memo = handlers.make_memo(config)
        kopf_settings = kopfthread.quiet_settings()
        kopf_settings.execution.max_workers = 8
        thread = kopfthread.OperatorThread(emulated.url, registry=registry, memo=memo,
                                           settings=kopf_settings)
        started = time.monotonic()
        thread.start(timeout=120)
        try:
            wait_generation_above(emulated, 0, timeout=300)
            first = time.monotonic() - started
            converge(emulated, workers)
            print(f"members={args.members} tasks={args.tasks} connectors={connectors}")
            print(f"first assignment of everything: {first:.2f}s after operator start; "
                  f"converged {time.monotonic() - started:.2f}s")
            runner = next(iter(memo["shell"].runners.values()))
            stats = memo["shell"].context.client.stats

            def measure(kind: str, count: int, act) -> None:
                latencies: list[float] = []
                writes: list[int] = []
                compute: list[float] = []
                internal: list[float] = []
                for i in range(count):
                    generation = status(emulated).get("rebalanceGeneration", 0)
                    before = dict(stats.by_kind)
                    results_before = runner.rounds_planned
                    t0 = time.monotonic()
                    act(i)
                    t1 = wait_generation_above(emulated, generation)
                    latencies.append(t1 - t0)
                    time.sleep(0.1)
                    cms = stats.by_kind.get("configmap", 0) - before.get("configmap", 0)
                    writes.append(cms)
                    new = runner.rounds_planned - results_before
                    recent = runner.results[-new:] if new else []
                    compute.extend(r.compute_s for r in recent)
                    internal.extend(r.latency_s for r in recent[:1] if r.latency_s is not None)
                    converge(emulated, workers)
                print(f"{kind}: n={count} p50={percentile(latencies, 50) * 1000:.0f}ms "
                      f"p99={percentile(latencies, 99) * 1000:.0f}ms "
                      f"max={max(latencies) * 1000:.0f}ms; ConfigMap writes in the first "
                      f"round: median {statistics.median(writes):.0f} "
                      f"(max {max(writes)}) of {len(workers.state)} members; "
                      f"assignor compute p50 "
                      f"{percentile(compute or [0.0], 50) * 1000:.0f}ms; operator-side "
                      f"event->written p50 {percentile(internal or [0.0], 50) * 1000:.0f}ms")

            names = sorted(workers.state)
            measure("departure -> written", args.departures,
                    lambda i: workers.remove(names[i * 7 % len(names)]))
            measure("join -> written", args.joins, lambda i: workers.add(f"new-{i:03d}"))
            for result in runner.results[-8:]:
                print("  round", result.generation, "written", result.written,
                      {k: round(v * 1000) for k, v in result.phases},
                      "event->written ms", round((result.latency_s or 0) * 1000))
            print(f"API writes by kind over the run: {dict(sorted(stats.by_kind.items()))}; "
                  f"409 conflicts: {stats.conflicts}")
        finally:
            thread.stop(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
