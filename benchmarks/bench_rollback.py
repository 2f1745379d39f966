"""An operator rolled back across "acknowledged revocations rewrite nobody", in the simulator.

    PYTHONPATH=operator .venv/bin/python benchmarks/bench_rollback.py [--to main]
        [--families 4] [--start 0] [--count 5000] [--from-start] [SEED ...]

Runs hard chaos seeds (``sim.chaos.run_hard``) with this tree's operator until its
first restore (a restart or a new leader term); from then on, as an older operator
would, every restore reads every document's ``revoked`` set as in flight (no
``status.state.revoking``, nothing dropped: ``restore.restore`` before this change) and
every round rewrites a document whose revoked set changed (the write rule before
``model.tells_more``). ``--to main``: the rest as in this tree (main before the
change: its restore, write rule and assignor are these); ``--to fd89244^``:
also without ``assignor.lost.one_origin_each`` (an assignor before ``fd89244``).
``--from-start``: the older rules from the first round (the control: no document
written by this change). Prints the runs that restored and every failing seed.
``--stale``: instead, how many runs end with a document that still lists a revocation
the final plan no longer holds in flight (an acknowledged one, never rewritten); with
``--to this`` nothing is rolled back.
docs/protocol.md, "Rolling the operator back across this change".

The older code is this tree's with those three functions swapped, not a checkout of
the older commit: the rest (the fence, ``epoch_base``, ...) is this tree's.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import Any

from kooper.control import restore
from kooper.core import model
from kooper.core.assignor import lost as lost_stage
from kooper.sim import chaos

_RESTORE = restore.restore
_TELLS_MORE = model.tells_more
_DROPPED = restore._acknowledged_dropped


class Rollback:
    """The switch: this tree's rules until ``rolled``, the older ones after."""

    def __init__(self, *, from_start: bool) -> None:
        self.from_start = from_start
        self.rolled = from_start

    def reset(self) -> None:
        self.rolled = self.from_start

    def restore(self, raw: object, configmaps: Any, *, group: str) -> restore.Restored:
        self.rolled = True
        if isinstance(raw, Mapping):
            raw = {k: v for k, v in raw.items() if k != "revoking"}
        return _RESTORE(raw, configmaps, group=group)

    def tells_more(self, told: model.ConnectorsAndTasks, tell: model.ConnectorsAndTasks, *,
                   acknowledged: bool) -> bool:
        if self.rolled:
            return not (told is tell or told == tell)
        return _TELLS_MORE(told, tell, acknowledged=acknowledged)

    def dropped(self, revoking: Any, assignments: Any, assigned_at: Any) -> Any:
        return dict(revoking) if self.rolled else _DROPPED(revoking, assignments, assigned_at)


def stale(options: argparse.Namespace) -> int:
    """``--stale``: runs that end with an acknowledged revocation in some document."""
    switch = Rollback(from_start=False)
    if options.to != "this":
        restore.restore = switch.restore
        model.tells_more = switch.tells_more
        restore._acknowledged_dropped = switch.dropped
    runs = ending = 0
    for seed in options.seeds or range(options.start, options.start + options.count):
        switch.reset()
        sim = chaos.hard_sim(seed, families=options.families)
        sim.run()
        if options.to != "this" and not switch.rolled:
            continue  # never restored: nothing rolled back
        runs += 1
        plan = sim.memory.persisted.state
        ending += any(doc.revoked and member in plan.assignments
                      and not plan.revoking.get(member) for member, doc in sim.written.items())
    print(f"{options.to}, families {options.families}: {ending} of {runs} runs end with an "
          f"acknowledged revocation in a document")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--to", choices=("main", "fd89244^", "this"), default="main")
    parser.add_argument("--stale", action="store_true")
    parser.add_argument("--families", type=int, default=4)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--from-start", action="store_true")
    parser.add_argument("seeds", nargs="*", type=int, help="these seeds instead")
    options = parser.parse_args()
    if options.stale:
        return stale(options)
    switch = Rollback(from_start=options.from_start)
    restore.restore = switch.restore
    model.tells_more = switch.tells_more
    restore._acknowledged_dropped = switch.dropped
    if options.to == "fd89244^":
        lost_stage.one_origin_each = lambda lost, assigned: None
    seeds = options.seeds or range(options.start, options.start + options.count)
    began = time.monotonic()
    restored = 0
    failing: list[tuple[int, tuple[str, ...]]] = []
    for seed in seeds:
        switch.reset()
        outcome = chaos.run_hard(seed, families=options.families)
        restored += switch.rolled and not options.from_start
        if outcome.violations:
            failing.append((seed, outcome.violations))
    print(f"rolled back to {options.to}{' from the start' if options.from_start else ''}, "
          f"families {options.families}: {len(seeds)} runs, {restored} restored, "
          f"{len(failing)} failing, {time.monotonic() - began:.0f} s")
    for seed, violations in failing:
        print(f"  seed {seed}: {violations[0]}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
