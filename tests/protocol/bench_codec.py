"""Codec speed: encode + decode 1,000 assignments of 100 tasks (100,000 tasks in all).

Not a test (timings flake on shared CI); run it: ``python tests/protocol/bench_codec.py``.
Prints the best of 5 runs, and bare ``json`` on the same documents for scale.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "operator"))

from kooper.core import model
from kooper.protocol import codec, messages


def assignments(members: int = 1000, tasks_each: int = 100) -> list[messages.Assignment]:
    result = []
    for m in range(members):
        connector = f"conn-{m % 50}"
        tasks = [f"{connector}-{m * tasks_each + i}" for i in range(tasks_each)]
        result.append(messages.Assignment(
            group="g", member=f"workers-{m}", generation=7, protocol=model.Protocol.COMPATIBLE,
            assigned=model.ConnectorsAndTasks.of([connector], tasks),
            epochs={r: 3 for r in [connector, *tasks]},
            configs={connector: {"topic": "orders", "tasks.max": "100"}}, leader="op/1",
        ))
    return result


def main() -> None:
    values = assignments()
    best_encode = best_decode = best_json = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        docs = [codec.encode_assignment(a) for a in values]
        encoded = time.perf_counter()
        back = [codec.decode_assignment(d) for d in docs]
        decoded = time.perf_counter()
        [json.dumps(json.loads(d), separators=(",", ":"), sort_keys=True) for d in docs]
        best_json = min(best_json, time.perf_counter() - decoded)
        best_encode = min(best_encode, encoded - started)
        best_decode = min(best_decode, decoded - encoded)
    assert back == values
    print(f"encode {best_encode * 1000:.1f} ms, decode {best_decode * 1000:.1f} ms, "
          f"bare json loads+dumps {best_json * 1000:.1f} ms "
          f"({len(values)} assignments, {sum(len(a.assigned) for a in values)} resources, "
          f"{sum(map(len, docs)) // len(docs)} bytes each)")


if __name__ == "__main__":
    main()
