"""Time ``kooper analyze`` on a synthetic 10-million-event log (or on given logs).

The synthetic log has two runs (eager and compatible) of ``--members`` members
and as many resources as it takes to reach ``--events`` rows: each resource
starts once, then is handed over (``stop`` + ``start`` elsewhere, sometimes on
the same member) once per round. It is generated with numpy and written with
pyarrow in ~1M-row row groups into a temp folder, so generation takes seconds.

    .venv/bin/python benchmarks/bench_analytics.py [--events 10000000] [--master local[2]]
    .venv/bin/python benchmarks/bench_analytics.py path/to/events/ [--master local[2]]

Prints the generation time, the Spark session startup, and the job's wall time
(check + read + transforms + writes + plots) with its event rate, the job's
progress lines (seconds per output table), and with ``--profile`` the slowest
Spark stages from Spark's event log (wall time and executor CPU time each).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kooper.analytics import job

ROUND_MS = 1_000
CHUNK_RESOURCES = 5_000


def _dictionary(indices: np.ndarray, names: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), pa.array(names))


def _constant(value: str, n: int) -> pa.DictionaryArray:
    return _dictionary(np.zeros(n, dtype=np.int32), [value])


def _chunk(
    rng: np.random.Generator, *, run: str, protocol: str, first: int, count: int,
    members: int, rounds: int,
) -> pa.Table:
    """``count`` resources from number ``first``: a start, then a hand-over per round."""
    owners = rng.integers(0, members, size=(count, rounds + 1))
    # Hand-over j: stop at round j + jitter, start (eager: later) on the next owner.
    stop_at = (np.arange(1, rounds + 1) * ROUND_MS)[None, :] + rng.integers(0, 400, (count, rounds))
    gap = rng.integers(0, 300 if protocol == "eager" else 60, size=(count, rounds))
    start_at = stop_at + gap
    first_start = rng.integers(0, 200, size=(count, 1))
    n = count * (1 + 2 * rounds)
    ts = np.concatenate([first_start, stop_at, start_at], axis=1).reshape(-1)
    member = np.concatenate([owners[:, :1], owners[:, :-1], owners[:, 1:]], axis=1).reshape(-1)
    kind = np.concatenate(
        [np.full((count, 1), 0), np.full((count, rounds), 1), np.full((count, rounds), 0)], axis=1
    ).reshape(-1)
    resource = np.repeat(np.arange(first, first + count), 1 + 2 * rounds)
    names = [f"c{i // 10}-{i % 10}" for i in range(first, first + count)]
    return pa.table({
        "ts_ms": pa.array(ts, pa.int64()),
        "run": _constant(run, n),
        "group": _constant("bench/wg", n),
        "member": _dictionary(member, [f"pod-{m}" for m in range(members)]),
        "resource": _dictionary(resource - first, names),
        "event": _dictionary(kind, ["start", "stop"]),
        "generation": pa.array(np.full(n, -1), pa.int64()),
        "epoch": pa.array(np.full(n, -1), pa.int64()),
        "protocol": _constant(protocol, n),
        "policy": _constant("kooper", n),
    })


def _lifecycle(*, run: str, protocol: str, members: int, rounds: int) -> pa.Table:
    """Joins at 0 and one ``round`` per round, ending after the last hand-over."""
    rows = [
        {"ts_ms": 0, "run": run, "group": "bench/wg", "member": f"pod-{m}", "resource": "",
         "event": "join", "generation": -1, "epoch": -1, "protocol": protocol, "policy": "kooper"}
        for m in range(members)
    ]
    rows += [
        {"ts_ms": (g + 1) * ROUND_MS + 500, "run": run, "group": "bench/wg", "member": "",
         "resource": "", "event": "round", "generation": g + 1, "epoch": -1,
         "protocol": protocol, "policy": "kooper"}
        for g in range(rounds + 1)
    ]
    return pa.Table.from_pylist(rows)


def generate(folder: Path, *, events: int, members: int, rounds: int, seed: int = 7) -> int:
    """Write the synthetic log as one Parquet file per run; returns the row count."""
    rng = np.random.default_rng(seed)
    per_resource = 1 + 2 * rounds
    resources = max(1, events // 2 // per_resource)
    total = 0
    for run, protocol in (("bench-eager", "eager"), ("bench-compatible", "compatible")):
        path = folder / f"{run}.parquet"
        meta = _lifecycle(run=run, protocol=protocol, members=members, rounds=rounds)
        with pq.ParquetWriter(path, meta.schema) as writer:
            writer.write_table(meta)
            total += meta.num_rows
            for first in range(0, resources, CHUNK_RESOURCES):
                count = min(CHUNK_RESOURCES, resources - first)
                table = _chunk(rng, run=run, protocol=protocol, first=first, count=count,
                               members=members, rounds=rounds)
                writer.write_table(table.cast(meta.schema))
                total += table.num_rows
    return total


def profile(folder: Path, *, top: int = 12) -> None:
    """The ``top`` slowest stages of the Spark event log(s) in ``folder``, by executor CPU.

    Each with its wall time, executor CPU time, tasks, and the rows it read (input
    or shuffle) and wrote (shuffle): that is how a stage is matched to a step of
    ``transforms`` (10M rows read: the log; 5M: the starts or intervals).
    """
    stages: list[tuple[float, float, int, int, int]] = []
    for log in (path for path in folder.rglob("*") if path.is_file()):
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # not an event-log line (a compressed or partial file)
            if event.get("Event") != "SparkListenerStageCompleted":
                continue
            info = event["Stage Info"]
            sums: dict[str, float] = collections.defaultdict(float)
            for acc in info.get("Accumulables", []):
                if isinstance(acc.get("Value"), int | float):
                    sums[acc.get("Name", "")] += acc["Value"]
            wall = (info.get("Completion Time", 0) - info.get("Submission Time", 0)) / 1000
            read = int(sums["internal.metrics.input.recordsRead"]
                       + sums["internal.metrics.shuffle.read.recordsRead"])
            stages.append((sums["internal.metrics.executorCpuTime"] / 1e9, wall,
                           int(info["Number of Tasks"]), read,
                           int(sums["internal.metrics.shuffle.write.recordsWritten"])))
    print(f"{len(stages)} stages: {sum(s[0] for s in stages):.1f} s executor CPU in total"
          f", {sum(s[1] for s in stages):.1f} s wall (stages may overlap); slowest by CPU:")
    print("   CPU s   wall s  tasks   rows read  rows written")
    for cpu, wall, tasks, read, written in sorted(stages, reverse=True)[:top]:
        print(f"  {cpu:6.1f}  {wall:7.1f}  {tasks:5d}  {read:10,d}  {written:12,d}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="existing event logs (default: generate one)")
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    parser.add_argument("--profile", action="store_true",
                        help="write Spark's event log and print the slowest stages")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="kooper-bench-analytics-"))
    try:
        paths = args.paths
        if not paths:
            started = time.perf_counter()
            (workdir / "logs").mkdir()
            rows = generate(workdir / "logs", events=args.events, members=args.members,
                            rounds=args.rounds)
            size = sum(p.stat().st_size for p in (workdir / "logs").glob("*.parquet"))
            print(f"generated {rows:,} events ({size / 1e6:.0f} MB Parquet) in "
                  f"{time.perf_counter() - started:.1f} s")
            paths = [str(workdir / "logs")]
        started = time.perf_counter()
        conf = [("spark.driver.memory", args.driver_memory)]
        if args.profile:
            (workdir / "events").mkdir()
            conf += [("spark.eventLog.enabled", "true"), ("spark.eventLog.compress", "false"),
                     ("spark.eventLog.dir", (workdir / "events").as_uri())]
        job.spark_session(args.master, conf, log=workdir / "spark.log")
        print(f"spark session ({args.master}): {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        result = job.run(paths, out=workdir / "report", master=args.master,
                         progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
        elapsed = time.perf_counter() - started
        events = sum(int(row["events"]) for row in result.metrics)
        print(f"kooper analyze: {events:,} events, {len(result.metrics)} runs in {elapsed:.1f} s "
              f"({events / elapsed / 1e3:.0f}k events/s)")
        for row in result.metrics:
            print(f"  {row['run']}: resources {row['resources']:,}, total pause "
                  f"{row['total_pause_ms'] / 1000:,.0f} task-s, moves {row['moves']:,}, "
                  f"rounds {row['rounds']}, overlaps {row['overlaps']}")
        if args.profile:
            job.spark_session(args.master).stop()  # flushes the event log
            profile(workdir / "events")
        if args.keep:
            print(f"kept {workdir}")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
