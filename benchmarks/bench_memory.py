"""The operator's memory, measured on the operator process alone: 1,000 members x 100,000 tasks.

    .venv/bin/python benchmarks/bench_memory.py [--members 1000] [--tasks 100000]
        [--minutes 60] [--tracemalloc 25]

Two processes. This one hosts the API emulator, plays the workers in bulk (as
``bench_operator.py`` does: every member whose ConfigMap changed applies it and
reports) and drives the churn. The operator is ``python -m kooper run`` in a child
process, with the chart's flags (metrics on, probes on, leader election on a Lease),
talking to the emulator over HTTP. Only the child's memory is measured, from
``/proc/<pid>/status``: ``VmRSS`` sampled every 0.2 s and ``VmHWM`` (the kernel's
peak RSS) at the end. The emulator's copy of every object lives in this process and
is not counted.

Churn, "one hour-equivalent" in compressed time: for each simulated minute one
member leaves (pod and Lease deleted) and a new one joins, one connector changes
(its config, or its ``tasksMax`` by +-10), and every 10th minute a connector is
deleted and another created. Each step waits until the group converged (every
member applied its document, the WorkerGroup is Ready and the operator made no
ConfigMap, WorkerGroup or Connector write for a second), so an hour of churn
runs as fast as the operator keeps up. ``scheduledRebalanceMaxDelay: 0s`` so lost
work moves at once (a 300 s delay would not compress).

The result is printed next to the chart's ``operator.resources`` (values.yaml).
``--tracemalloc N`` runs the operator under ``tracemalloc`` (much slower, and the
RSS figures then include tracemalloc's own bookkeeping) and prints its N biggest
allocation sites after the churn: where the memory is held.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import yaml

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(HERE))

import bench_operator  # noqa: E402  (its bulk workers and change feed)
from bench_operator import GROUP, NS  # noqa: E402
from kooper.emulator import cluster  # noqa: E402

MIB = 1024 * 1024
RENEW_S = 10.0
"""A stalled group (no write, nothing to apply) gets every member's renewal after this."""
_UNITS = {"Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB, "K": 1000, "M": 1000**2, "G": 1000**3}

# The operator child under tracemalloc: SIGUSR1 writes the biggest allocation sites.
_TRACED = """
import runpy, signal, sys, tracemalloc
tracemalloc.start(int(sys.argv.pop(1)))
out, top = sys.argv.pop(1), int(sys.argv.pop(1))
taken = []
def dump(*_):
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)])
    stats = snapshot.statistics("traceback")
    total = sum(s.size for s in stats)
    lines = [f"traced: {total / 2**20:.1f} MiB in {len(stats)} sites"]
    for s in stats[:top]:
        lines.append(f"{s.size / 2**20:8.1f} MiB {s.count:9d} blocks")
        lines.extend(f"    {line}" for line in s.traceback.format()[-6:])
    if taken:
        lines.append("grown since the last dump:")
        for s in snapshot.compare_to(taken[-1], "traceback")[:top]:
            lines.append(f"{s.size_diff / 2**20:+8.1f} MiB {s.count_diff:+9d} blocks")
            lines.extend(f"    {line}" for line in s.traceback.format()[-6:])
    taken.append(snapshot)
    with open(f"{out}.{len(taken)}", "w") as f:
        f.write("\\n".join(lines) + "\\n")
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["kooper", *sys.argv[1:]]
runpy.run_module("kooper", run_name="__main__")
"""

def quantity(text: str) -> int:
    """A Kubernetes memory quantity ("256Mi") in bytes."""
    for suffix, factor in _UNITS.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(text)


def chart_memory() -> tuple[int, int]:
    """The chart's operator memory request and limit, in bytes."""
    values = yaml.safe_load((ROOT / "charts" / "kooper" / "values.yaml").read_text())
    resources = values["operator"]["resources"]
    return quantity(resources["requests"]["memory"]), quantity(resources["limits"]["memory"])


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid`` in bytes (empty once it exited)."""
    found: dict[str, int] = {}
    try:
        text = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024
    return found


class Sampler(threading.Thread):
    """The child's RSS every 0.2 s, with the phase it was taken in."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.pid = pid
        self.phase = "start"
        self.samples: list[tuple[float, str, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            rss = proc_status(self.pid).get("VmRSS")
            if rss is not None:
                self.samples.append((time.monotonic(), self.phase, rss))

    def peak(self, phase: str | None = None) -> int:
        return max((r for _, p, r in self.samples if phase is None or p == phase), default=0)

    def now(self) -> int:
        return proc_status(self.pid).get("VmRSS", 0)


class Feed(bench_operator.Feed):
    """``bench_operator.Feed`` that also counts the operator's writes the churn waits on."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.renewals = 0
        """Times every member renewed its Lease because the group stalled (``converge``)."""

    def __call__(self, rv: int, spec: Any, kind: str, obj: dict[str, Any], old: Any) -> None:
        if spec.plural in ("configmaps", "connectors", "workergroups"):
            self.writes += 1
        super().__call__(rv, spec, kind, obj, old)


def converge(emulated: cluster.EmulatedCluster, workers: bench_operator.Workers, feed: Feed,
             timeout: float) -> None:
    """Until every member applied its document, the group is Ready and nothing was
    written for a second (the Connector statuses that trail a round included)."""
    deadline = time.monotonic() + timeout
    quiet, before, active = 0, feed.writes, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        applied = workers.apply_changed()
        now = feed.writes
        if applied or now != before:
            active = time.monotonic()
        quiet = quiet + 1 if applied == 0 and now == before and bench_operator.ready(
            emulated) else 0
        before = now
        if quiet >= 5:
            return
        if time.monotonic() - active > RENEW_S:
            # Real workers renew their Lease every few seconds; the bench's only write
            # when they apply a document. A stalled group gets the renewals it would see.
            for name in sorted(workers.state):
                workers.push(name)
            feed.renewals += 1
            active = time.monotonic()
    raise TimeoutError("the group did not converge")


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def trace(child: subprocess.Popen[bytes], dump: pathlib.Path, n: int) -> None:
    """Have the traced operator write its ``n``-th allocation snapshot; wait for it."""
    child.send_signal(signal.SIGUSR1)
    found = dump.with_suffix(f".txt.{n}")
    deadline = time.monotonic() + 600
    while not found.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)


def connector(name: str, tasks: int, topic: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"workerGroup": GROUP, "tasksMax": tasks,
                                                 "config": {"topic": topic}}}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--tasks-per-connector", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=60,
                        help="simulated minutes of churn (default 60: one hour-equivalent)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one step may take to converge")
    parser.add_argument("--operator-env", action="append", default=[], metavar="KEY=VALUE",
                        help="extra environment of the operator process (repeatable), "
                        "e.g. MALLOC_ARENA_MAX=2")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N",
                        help="trace the operator's allocations; print the N biggest sites")
    args = parser.parse_args()

    request, limit = chart_memory()
    feed = Feed()
    with cluster.EmulatedCluster(crds=sorted((ROOT / "crds").glob("*.yaml")),
                                 history_limit=200_000) as emulated:
        emulated.store.subscribe(feed)
        emulated.create("workergroups", {"metadata": {"name": GROUP}, "spec": {
            "selector": {"matchLabels": {"app": "bench"}}, "scheduledRebalanceMaxDelay": "0s",
            "leaseDurationSeconds": 3600}}, namespace=NS)
        connectors = args.tasks // args.tasks_per_connector
        names = [f"c{n:05d}" for n in range(connectors)]
        for n, name in enumerate(names):
            emulated.create("connectors", connector(name, args.tasks_per_connector, f"t{n}"),
                            namespace=NS)
        workers = bench_operator.Workers(emulated, feed)
        for n in range(args.members):
            workers.add(f"w-{n:04d}")

        flags = ["run", "--namespace", NS, "--metrics-port", str(free_port()), "--health-port",
                 str(free_port()), "--leader-election", "--leader-namespace", NS,
                 "--identity", "bench-memory"]
        env = {**os.environ, **dict(pair.split("=", 1) for pair in args.operator_env),
               "KOOPER_KUBE_API": emulated.url,
               "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"),
                                              os.environ.get("PYTHONPATH", "")])}
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="bench-memory-"))
        dump, log = scratch / "tracemalloc.txt", scratch / "operator.log"
        command = ([sys.executable, "-c", _TRACED, "5", str(dump), str(args.tracemalloc),
                    *flags] if args.tracemalloc else [sys.executable, "-m", "kooper", *flags])
        started = time.monotonic()
        print(f"operator log: {log}", flush=True)
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                 stderr=log.open("w"))
        sampler = Sampler(child.pid)
        sampler.start()
        try:
            feed.wait_above(0, timeout=args.timeout)
            converge(emulated, workers, feed, args.timeout)
            sampler.phase = "churn"
            settled = sampler.now()
            if args.tracemalloc:
                trace(child, dump, 1)
            print(f"members={args.members} tasks={args.tasks} connectors={connectors}: "
                  f"converged {time.monotonic() - started:.0f} s after the operator started; "
                  f"RSS {settled / MIB:.0f} MiB (peak so far {sampler.peak() / MIB:.0f} MiB)",
                  flush=True)
            churn_started = time.monotonic()
            tasks = dict.fromkeys(names, args.tasks_per_connector)
            for minute in range(args.minutes):
                member = sorted(workers.state)[(minute * 37) % len(workers.state)]
                workers.remove(member)
                workers.add(f"j-{minute:04d}")
                name = names[(minute * 53) % len(names)]
                if minute % 2:
                    tasks[name] += 10 if tasks[name] == args.tasks_per_connector else -10
                    emulated.patch("connectors", name, {"spec": {"tasksMax": tasks[name]}},
                                   namespace=NS)
                else:
                    emulated.patch("connectors", name, {"spec": {"config": {
                        "topic": f"t{name}-{minute}"}}}, namespace=NS)
                if minute % 10 == 9:
                    gone = names.pop(0)
                    tasks.pop(gone)
                    emulated.delete("connectors", gone, namespace=NS)
                    fresh = f"n{minute:05d}"
                    names.append(fresh)
                    tasks[fresh] = args.tasks_per_connector
                    emulated.create("connectors", connector(fresh, args.tasks_per_connector,
                                                            fresh), namespace=NS)
                converge(emulated, workers, feed, args.timeout)
                if minute % 10 == 9 or minute == args.minutes - 1:
                    print(f"  minute {minute + 1}: RSS {sampler.now() / MIB:.0f} MiB, peak "
                          f"{sampler.peak() / MIB:.0f} MiB "
                          f"({time.monotonic() - churn_started:.0f} s of churn)", flush=True)
            after = sampler.now()
            hwm = proc_status(child.pid).get("VmHWM", sampler.peak())
            if args.tracemalloc:
                trace(child, dump, 2)
        finally:
            sampler.stopped.set()
            child.terminate()
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    extra = f" ({' '.join(args.operator_env)})" if args.operator_env else ""
    print(f"\noperator process alone{extra}, "
          f"{args.members} members x {args.tasks} tasks, "
          f"{args.minutes} simulated minutes of churn "
          f"({time.monotonic() - churn_started:.0f} s):")
    rows = [("RSS once converged", settled), ("peak RSS (VmHWM)", hwm),
            (f"RSS after {args.minutes} min of churn", after),
            ("chart memory request", request), ("chart memory limit", limit)]
    for label, value in rows:
        print(f"  {label:<32} {value / MIB:7.0f} MiB")
    print(f"  stalls answered with a renewal of every Lease: {feed.renewals}")
    print(f"  headroom under the limit at the peak: {(limit - hwm) / MIB:.0f} MiB "
          f"({(limit - hwm) / limit:.0%})")
    for n in (1, 2) if args.tracemalloc else ():
        found = dump.with_suffix(f".txt.{n}")
        if found.exists():
            print(f"\ntracemalloc {('once converged', 'after the churn')[n - 1]}:\n"
                  + found.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
