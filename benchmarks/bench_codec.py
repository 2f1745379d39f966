"""Codec speed: encode + decode 1,000 assignments of 100 tasks (100,000 tasks in all).

Those are the documents of a 1,000-member group running 100,000 tasks. Not a test
(timings flake on shared CI); ``make bench`` runs it, or:

    .venv/bin/python benchmarks/bench_codec.py [--members 1000 --tasks-each 100 --repeat 7]

Prints the best of ``--repeat`` runs, wall clock and CPU time (CPU time is steadier on
a busy machine), and bare ``json`` loads+dumps of the same documents for scale.
"""

from __future__ import annotations

import argparse
import json
import time

from kooper.core import model
from kooper.protocol import codec, messages


def assignments(members: int, tasks_each: int) -> list[messages.Assignment]:
    """One connector's slice of tasks per member, an epoch for every resource."""
    result = []
    for m in range(members):
        connector = f"conn-{m % 50}"
        tasks = [f"{connector}-{m * tasks_each + i}" for i in range(tasks_each)]
        result.append(
            messages.Assignment(
                group="g",
                member=f"workers-{m}",
                generation=7,
                protocol=model.Protocol.COMPATIBLE,
                assigned=model.ConnectorsAndTasks.of([connector], tasks),
                epochs={r: 3 for r in [connector, *tasks]},
                configs={connector: {"topic": "orders", "tasks.max": "100"}},
                leader="op/1",
            )
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--tasks-each", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    values = assignments(args.members, args.tasks_each)
    best: dict[str, float] = {}

    def record(name: str, wall: float, cpu: float) -> None:
        best[name] = min(best.get(name, wall), wall)
        best[name + " cpu"] = min(best.get(name + " cpu", cpu), cpu)

    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        docs = [codec.encode_assignment(a) for a in values]
        record("encode", time.perf_counter() - wall, time.process_time() - cpu)
        wall, cpu = time.perf_counter(), time.process_time()
        back = [codec.decode_assignment(d) for d in docs]
        record("decode", time.perf_counter() - wall, time.process_time() - cpu)
        wall, cpu = time.perf_counter(), time.process_time()
        [json.dumps(json.loads(d), separators=(",", ":"), sort_keys=True) for d in docs]
        record("json", time.perf_counter() - wall, time.process_time() - cpu)
    if back != values:
        raise SystemExit("decode(encode(x)) != x")
    total = best["encode"] + best["decode"]
    total_cpu = best["encode cpu"] + best["decode cpu"]
    print(
        f"encode {best['encode'] * 1000:.1f} ms, decode {best['decode'] * 1000:.1f} ms, "
        f"total {total * 1000:.1f} ms (cpu {total_cpu * 1000:.1f} ms); "
        f"bare json loads+dumps {best['json'] * 1000:.1f} ms "
        f"({len(values)} assignments, {sum(len(a.assigned) for a in values)} resources, "
        f"{sum(map(len, docs)) // len(docs)} bytes each)"
    )


if __name__ == "__main__":
    main()
