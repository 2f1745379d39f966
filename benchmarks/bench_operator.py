"""The operator at scale against the emulated cluster: 1,000 members, 100,000 tasks.

    .venv/bin/python benchmarks/bench_operator.py [--members 1000] [--tasks 100000]
        [--departures 20] [--joins 10] [--reports 10] [--profile out.pstats] [--gc-freeze]
        [--gc-threshold 700,10,10] [--tree DIR]

What it measures (printed, not asserted), each from the moment the bench acts:

* departure → written: a member leaves as ``Worker.leave`` does, its Lease deleted
  while its pod is still there (``delay 0s``, so its work moves at once; the pod is
  deleted after the group converged); stops when the last ConfigMap of the round that follows
  is stored (the emulator's change feed timestamps every write, no polling), and
  separately when the WorkerGroup status shows the new generation (written
  after the ConfigMaps);
* join → written: a new member's Lease appears; the round revokes for balance;
* report → written: a member that was revoked for balance reports that it let go
  (one Lease patch); the next round assigns the freed work elsewhere;
* API writes per round, by kind: only members whose assignment changed get a
  ConfigMap write; Connector status patches only for connectors whose placement
  changed;
* ConfigMap writes per disruption until converged (deletions included) against the
  members whose assignment (what they run once converged) changed, and their ratio
  (docs/protocol.md, "Which documents a round writes").

``--tree DIR`` runs the operator of another checkout (``DIR/operator``) under this
same bench: ``bench_writes.py`` uses it to measure an older commit in the same run.

``--profile PATH`` runs the operator's thread under cProfile during the measured
part only, writes the stats to PATH and prints the top functions. The emulator
and the bench's workers share the process (and the GIL) with the operator, so
latencies here are pessimistic for CPU. Each disruption also prints the operator
thread's CPU time (comparable across runs on a busy machine) and the full garbage
collections that happened meanwhile: the emulator's objects (every stored body)
live in this process too, so a full collection scans them. ``--gc-freeze`` turns
on the operator's own freeze (``kooper run``'s default: once every group planned
and it went quiet, ``shell/gcfreeze.py``), which here freezes the emulator's
objects too; ``--gc-threshold`` tries other collector thresholds.

Workers are played in bulk: after each round, every member whose ConfigMap
changed applies it and reports (one Lease patch each).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import gc
import io
import pathlib
import pstats
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import kopf

ROOT = pathlib.Path(__file__).resolve().parents[1]
TREE = pathlib.Path(sys.argv[sys.argv.index("--tree") + 1]) if "--tree" in sys.argv[:-1] \
    else ROOT
"""``--tree DIR``: the operator of another checkout (an older commit, for before/after in one
run, ``bench_writes.py``); read before the imports below, which it decides."""
sys.path.insert(0, str(TREE / "operator"))

from kooper.core import model  # noqa: E402
from kooper.emulator import cluster, kopfthread  # noqa: E402
from kooper.protocol import codec, messages  # noqa: E402
from kooper.shell import handlers, settings  # noqa: E402

NS = "default"
GROUP = "bench"
LEASES = "coordination.k8s.io/v1/leases"


def now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Feed:
    """A listener on the emulator's store: when each ConfigMap and status write landed."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.generation = 0
        self.generation_at: dict[int, float] = {}
        self.configmap_at: list[tuple[float, int]] = []
        """(time, generation written) of every ConfigMap write of the group."""
        self.changed: set[str] = set()
        """Members whose ConfigMap changed since the workers last looked."""

    def __call__(self, rv: int, spec: Any, kind: str, obj: dict[str, Any], old: Any) -> None:
        # Runs under the store's lock for every change: keep it cheap.
        meta = obj.get("metadata") or {}
        if spec.plural == "configmaps":
            labels = meta.get("labels") or {}
            if labels.get("kooper.dev/group") != GROUP or kind == "DELETED":
                return
            with self.cond:
                self.configmap_at.append((time.monotonic(), self.generation + 1))
                self.changed.add(labels.get("kooper.dev/member", ""))
        elif spec.plural == "workergroups" and meta.get("name") == GROUP:
            generation = (obj.get("status") or {}).get("rebalanceGeneration", 0)
            if isinstance(generation, int) and generation > self.generation:
                with self.cond:
                    self.generation = generation
                    self.generation_at[generation] = time.monotonic()
                    self.cond.notify_all()

    def wait_above(self, generation: int, timeout: float = 60) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: self.generation > generation, timeout):
                raise TimeoutError(f"generation stayed at {generation}")
            return self.generation_at[min(g for g in self.generation_at if g > generation)]

    def take_changed(self) -> set[str]:
        with self.cond:
            changed, self.changed = self.changed, set()
            return changed


class Workers:
    def __init__(self, emulated: cluster.EmulatedCluster, feed: Feed) -> None:
        self.emulated = emulated
        self.feed = feed
        self.state: dict[str, tuple[str, int, model.ConnectorsAndTasks]] = {}
        self.leaving: list[str] = []

    def report(self, name: str, *, left: bool = False) -> str:
        incarnation, generation, owned = self.state[name]
        return codec.encode_report(messages.Report(
            member=name, incarnation=incarnation,
            protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
            generation=generation, owned=model.EMPTY if left else owned, left=left))

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
        """The member leaves as ``Worker.leave`` does: its last report says it left (what
        proves the process stopped), then its Lease goes while its pod is still there; the
        pod goes once the group converged (``reap``). A Lease deleted without that word,
        or a pod deleted with its Lease, may leave a process running
        (``control.liveness.vanished``): its work would wait out the Lease's hour."""
        self.emulated.patch(LEASES, f"kooper-{name}", {"metadata": {"annotations": {
            messages.REPORT_ANNOTATION: self.report(name, left=True)}}}, namespace=NS)
        self.state.pop(name)
        self.emulated.delete(LEASES, f"kooper-{name}", namespace=NS)
        self.leaving.append(name)

    def reap(self) -> None:
        """Delete the pods of members that left (their departure is planned already)."""
        for name in self.leaving:
            self.emulated.delete("pods", name, namespace=NS)
        self.leaving.clear()

    def document(self, name: str) -> messages.Assignment | None:
        cm = self.emulated.get("configmaps", f"kooper-{name}", namespace=NS)
        text = ((cm or {}).get("data") or {}).get(messages.CONFIGMAP_KEY)
        return codec.decode_assignment(text) if text else None

    def apply(self, name: str, *, only_revocations: bool = False) -> bool:
        """The member applies its document; ``only_revocations``: stop revoked, report later."""
        doc = self.document(name)
        if doc is None or name not in self.state:
            return False
        incarnation, generation, owned = self.state[name]
        if only_revocations:
            kept = owned.difference(doc.revoked)
            if kept == owned:
                return False
            self.state[name] = (incarnation, generation, kept)
            return True
        if doc.generation == generation and doc.assigned == owned:
            return False
        self.state[name] = (incarnation, doc.generation, doc.assigned)
        self.push(name)
        return True

    def push(self, name: str) -> None:
        self.emulated.patch(LEASES, f"kooper-{name}", {"metadata": {"annotations": {
            messages.REPORT_ANNOTATION: self.report(name)}}}, namespace=NS)

    def apply_changed(self) -> int:
        """Every member whose ConfigMap changed applies it and reports; returns how many."""
        return sum(self.apply(name) for name in sorted(self.feed.take_changed()))


def ready(emulated: cluster.EmulatedCluster) -> bool:
    found = (emulated.get("workergroups", GROUP, namespace=NS) or {}).get("status") or {}
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in found.get("conditions") or ())


def converge(emulated: cluster.EmulatedCluster, workers: Workers, timeout: float = 300,
             writes: Callable[[], int] = lambda: 0,
             busy: Callable[[], bool] = lambda: False) -> None:
    """Until every member applied its document, the group is Ready, and the operator has
    made no API write for a second and has no Connector statuses queued (they trail
    the round; computing 1,000 of them after the start takes longer than a second
    with no write): the next measurement then starts from an idle operator."""
    deadline = time.monotonic() + timeout
    workers.reap()
    quiet = 0
    before = writes()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        applied = workers.apply_changed()
        now = writes()
        quiet = (quiet + 1 if applied == 0 and now == before and not busy() and ready(emulated)
                 else 0)
        before = now
        if quiet >= 5:
            return
    raise TimeoutError("the group did not converge")


class Collections:
    """Full (generation 2) garbage collections of the whole process, and their pauses."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Profiler:
    """cProfile of the operator's thread, switched on and off from the bench's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        self.profile = cProfile.Profile()

    def _call(self, method: Callable[[], None]) -> None:
        if self.loop is None:
            return
        done = threading.Event()

        def run() -> None:
            method()
            done.set()

        self.loop.call_soon_threadsafe(run)
        done.wait(10)

    def start(self) -> None:
        self._call(self.profile.enable)

    def stop(self, path: str) -> None:
        self._call(self.profile.disable)
        self.profile.dump_stats(path)
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(path, stream=out).sort_stats(key).print_stats(30)
            lines = out.getvalue().splitlines()
            start = next(i for i, line in enumerate(lines) if "ncalls" in line)
            print(f"--- operator thread, top 30 by {key}")
            print("\n".join(lines[start:start + 31]))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--tasks-per-connector", type=int, default=100)
    parser.add_argument("--departures", type=int, default=20)
    parser.add_argument("--joins", type=int, default=10)
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--no-connector-status", action="store_true",
                        help="do not patch Connector statuses (the core path only)")
    parser.add_argument("--profile", metavar="PATH", help="cProfile the operator thread")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="the operator's own gc.freeze() (kooper run's default, "
                             "shell/gcfreeze.py), waited for before measuring; here it also "
                             "freezes the emulator's objects (the API server's elsewhere)")
    parser.add_argument("--tree", metavar="DIR", default=str(ROOT),
                        help="the checkout whose operator/ to run (read before the imports)")
    parser.add_argument("--gc-threshold", metavar="G0,G1,G2",
                        help="gc.set_threshold() before the operator starts (default: "
                             "CPython's 700,10,10)")
    args = parser.parse_args()

    if args.gc_threshold:
        gc.set_threshold(*(int(part) for part in args.gc_threshold.split(",")))
    feed = Feed()
    collections = Collections()
    with cluster.EmulatedCluster(crds=sorted((ROOT / "crds").glob("*.yaml")),
                                 history_limit=200_000) as emulated:
        emulated.store.subscribe(feed)
        emulated.create("workergroups", {"metadata": {"name": GROUP}, "spec": {
            "selector": {"matchLabels": {"app": "bench"}}, "scheduledRebalanceMaxDelay": "0s",
            "leaseDurationSeconds": 3600}}, namespace=NS)
        connectors = args.tasks // args.tasks_per_connector
        for n in range(connectors):
            emulated.create("connectors", {"metadata": {"name": f"c{n:05d}"}, "spec": {
                "workerGroup": GROUP, "tasksMax": args.tasks_per_connector,
                "config": {"topic": f"t{n}"}}}, namespace=NS)
        workers = Workers(emulated, feed)
        for n in range(args.members):
            workers.add(f"w-{n:04d}")

        config = settings.Config(kube_api=emulated.url, identity="bench", debounce_s=0.05,
                                 connector_status=not args.no_connector_status,
                                 gc_freeze=args.gc_freeze)
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
            feed.wait_above(0, timeout=300)
            first = time.monotonic() - started
            stats = memo["shell"].context.client.stats

            def writes() -> int:
                return int(stats.writes)

            def busy() -> bool:
                # getattr: the bench also runs against older trees, for before/after.
                return any(getattr(r, "patching_connectors", False)
                           for r in memo["shell"].runners.values())

            converge(emulated, workers, writes=writes, busy=busy)
            print(f"members={args.members} tasks={args.tasks} connectors={connectors} "
                  f"connector status: {'off' if args.no_connector_status else 'on'}")
            print(f"first assignment of everything: {first:.2f}s after operator start; "
                  f"converged {time.monotonic() - started:.2f}s", flush=True)
            runner = next(iter(memo["shell"].runners.values()))
            if args.gc_freeze:
                deadline = time.monotonic() + 120
                while not gc.get_freeze_count() and time.monotonic() < deadline:
                    time.sleep(0.2)  # The operator freezes once quiet (gcfreeze.quiet_s).
                print(f"operator's gc.freeze(): {gc.get_freeze_count()} objects frozen, "
                      f"{time.monotonic() - started:.1f}s after start")
            print(f"gc thresholds {gc.get_threshold()}", flush=True)
            ident = getattr(getattr(thread, "_thread", None), "ident", None)
            clock = time.pthread_getcpuclockid(ident) if ident is not None else None

            def operator_cpu() -> float:
                # CPU seconds of kopf's thread: comparable across runs on a busy machine.
                return time.clock_gettime(clock) if clock is not None else 0.0

            profiler = Profiler(runner.task.get_loop() if runner.task else None)
            if args.profile:
                profiler.start()

            def measure(kind: str, count: int, act: Callable[[int], None],
                        prepare: Callable[[int], None] | None = None) -> None:
                if count <= 0:
                    return
                to_cm: list[float] = []
                to_status: list[float] = []
                cm_writes: list[int] = []
                all_writes: dict[str, list[int]] = {}
                sizes: dict[str, list[float]] = {}
                cpu: list[float] = []
                moved: list[int] = []
                cm_total: list[int] = []
                full_gcs = len(collections.pauses)
                for i in range(count):
                    if prepare is not None:
                        prepare(i)
                    running = {name: owned for name, (_, _, owned) in workers.state.items()}
                    generation = feed.generation
                    before = dict(stats.by_kind)
                    # getattr: the bench also runs against older trees, for before/after.
                    sent_by_kind = getattr(stats, "bytes_by_kind", {})
                    bytes_before = dict(sent_by_kind)
                    cpu0 = operator_cpu()
                    t0 = time.monotonic()
                    act(i)
                    t_status = feed.wait_above(generation)
                    cpu.append(operator_cpu() - cpu0)
                    with feed.cond:
                        written = [t for t, g in feed.configmap_at
                                   if t >= t0 and g == generation + 1]
                    to_status.append(t_status - t0)
                    to_cm.append((max(written) if written else t_status) - t0)
                    cm_writes.append(len(written))
                    converge(emulated, workers, writes=writes, busy=busy)
                    moved.append(sum(1 for name, (_, _, owned) in workers.state.items()
                                     if owned != running.get(name, model.EMPTY)))
                    cm_total.append(stats.by_kind.get("configmap", 0)
                                    - before.get("configmap", 0))
                    for kind_, n in stats.by_kind.items():
                        calls = n - before.get(kind_, 0)
                        all_writes.setdefault(kind_, []).append(calls)
                        if calls:
                            sent = sent_by_kind.get(kind_, 0) - bytes_before.get(kind_, 0)
                            sizes.setdefault(kind_, []).append(sent / calls)
                ratios = [c / max(1, m) for c, m in zip(cm_total, moved, strict=True)]
                print(f"{kind}: n={count} (ms: "
                      + " ".join(f"{t * 1000:.0f}" for t in to_cm) + ")\n"
                      f"  -> last ConfigMap written: p50={percentile(to_cm, 50) * 1000:.0f}ms "
                      f"p99={percentile(to_cm, 99) * 1000:.0f}ms "
                      f"max={max(to_cm) * 1000:.0f}ms\n"
                      f"  -> WorkerGroup status:     p50={percentile(to_status, 50) * 1000:.0f}ms "
                      f"p99={percentile(to_status, 99) * 1000:.0f}ms "
                      f"max={max(to_status) * 1000:.0f}ms\n"
                      f"  operator thread CPU until the status: p50="
                      f"{percentile(cpu, 50) * 1000:.0f}ms p99={percentile(cpu, 99) * 1000:.0f}ms"
                      "\n"
                      f"  full GCs meanwhile: {len(collections.pauses) - full_gcs}, longest "
                      f"{max(collections.pauses[full_gcs:] or [0.0]) * 1000:.0f}ms\n"
                      f"  ConfigMaps written in that round: median "
                      f"{statistics.median(cm_writes):.0f} (max {max(cm_writes)}) of "
                      f"{len(workers.state)} members\n"
                      f"  API writes per disruption until converged (median by kind): "
                      + ", ".join(f"{k}={statistics.median(v):.0f}"
                                  for k, v in sorted(all_writes.items()))
                      + "; the first: " + ", ".join(f"{k}={v[0]}"
                                                    for k, v in sorted(all_writes.items()))
                      + f"\n  ConfigMap writes until converged per member whose assignment "
                      f"changed: median {statistics.median(cm_total):.0f} for "
                      f"{statistics.median(moved):.0f}, ratio median "
                      f"{statistics.median(ratios):.2f} max {max(ratios):.2f}"
                      + "\n  mean body bytes per write: "
                      + ", ".join(f"{k}={statistics.median(v):.0f}"
                                  for k, v in sorted(sizes.items())), flush=True)

            names = sorted(workers.state)
            measure("departure -> written", args.departures,
                    lambda i: workers.remove(names[i * 7 % len(names)]))
            measure("join -> written", args.joins, lambda i: workers.add(f"new-{i:03d}"))
            held: list[str] = []

            def revoke_all_but_one(i: int) -> None:
                # A join revokes work from some members for balance; all of them apply
                # and report except one, whose report is what the measurement sends.
                generation = feed.generation
                workers.add(f"late-{i:03d}")
                feed.wait_above(generation)
                changed = sorted(feed.take_changed())
                revoked = [n for n in changed if n in workers.state
                           and (doc := workers.document(n)) is not None and doc.revoked]
                held[:] = revoked[:1]
                for _ in range(6):
                    for name in changed:
                        if name not in held:
                            workers.apply(name)
                    time.sleep(0.2)
                    changed = sorted(feed.take_changed())
                with feed.cond:
                    feed.changed.update(changed)  # converge() applies them

            if args.reports:
                measure("report -> written", args.reports,
                        lambda i: [workers.apply(name) for name in held],
                        prepare=revoke_all_but_one)
            if args.profile:
                profiler.stop(args.profile)
            for result in runner.results[-6:]:
                print("  round", result.generation, "written", result.written,
                      {k: round(v * 1000) for k, v in result.phases})
            print(f"API writes by kind over the run: {dict(sorted(stats.by_kind.items()))}; "
                  f"409 conflicts: {stats.conflicts}")
        finally:
            thread.stop(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
