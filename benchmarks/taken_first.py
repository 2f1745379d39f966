"""An experiment, not this tree's rule: run a benchmark with ``balance.pick_spread_tasks``
ordering connectors by ``taken`` before epochs.

    PYTHONPATH=operator .venv/bin/python benchmarks/taken_first.py SCRIPT [ARGS...]
    (e.g. benchmarks/bench_operator.py --gc-freeze --members 300 --tasks 30000)

``pick_spread_tasks`` chooses what a member gives up for balance. When the member holds
one task of each of its connectors (the usual case) its key is (size, -epoch, taken,
rank): the connector whose task was handed out most often goes first, and only among
equal epochs the one fewest of whose tasks other members already give up this round.
Here ``taken`` comes before the epoch. Only that case is patched (members holding two
tasks of a connector keep the tree's order). See docs/benchmarks.md, "Issue 23's speed
targets".
"""

from __future__ import annotations

import collections
import runpy
import sys
from collections.abc import Iterable, Mapping

from kooper.core import balance, ids


def patch() -> None:
    original = balance.pick_spread_tasks

    def pick(tasks: Iterable[str], count: int, taken: collections.Counter[str] | None = None,
             epochs: Mapping[str, int] | None = None) -> list[str]:
        listed = list(tasks)
        connectors = list(ids.task_connectors(listed))
        if count <= 0 or taken is None or len(set(connectors)) != len(listed):
            return original(listed, count, taken, epochs)
        known = epochs or {}
        # Ties: the connector that sorts last first, as the tree's order.
        order = sorted(zip(connectors, listed, strict=True), key=lambda ct: ct[0], reverse=True)
        order.sort(key=lambda ct: (taken.get(ct[0], 0), -known.get(ct[1], 0)))
        for connector, _ in order[:count]:
            taken[connector] += 1
        return [task for _, task in order[:count]]

    balance.pick_spread_tasks = pick


if __name__ == "__main__":
    patch()
    sys.argv = sys.argv[1:]
    sys.path.insert(0, str(__import__("pathlib").Path(sys.argv[0]).resolve().parent))
    runpy.run_path(sys.argv[0], run_name="__main__")
