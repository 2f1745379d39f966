"""The assignor at scale, an older commit and this tree side by side in one run.

    .venv/bin/python benchmarks/bench_assignor_vs.py [--base 7127ad7] [--repeat 3] [--fastest]
        [-- ARGS]

Runs this tree's ``bench_assignor.py`` (``ARGS`` passed on; default 1,000 members x
100,000 tasks) on the assignor of ``--base`` (``git archive`` of its ``operator/`` into a
temporary directory) and on this tree's, in turn (base, this, base, ...), and prints one
table: per round, the median warm and cached ms of each, and this tree's over the base's.
A ratio above 1 is slower than the base. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import sys

import trees

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_assignor.py"
ROW = re.compile(r"^(?P<name>\S.*?)\s+(?P<cold>[\d.]+)\s+(?P<warm>[\d.]+)\s+(?P<cached>[\d.]+)"
                 r"\s+(?P<moved>\d+)\s+(?P<minimum>\d+)$")

Rows = dict[str, tuple[float, float]]
"""round → (warm ms, cached ms)."""


def parse(text: str) -> Rows:
    """Each round's (warm, cached) ms from one ``bench_assignor.py`` output."""
    return {m["name"]: (float(m["warm"]), float(m["cached"]))
            for m in map(ROW.match, text.splitlines()) if m}


def run(tree: pathlib.Path, args: list[str]) -> Rows:
    return parse(trees.run(tree, [str(BENCH), *args]))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", default="7127ad7", help="the older commit (default 7127ad7)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tree")
    parser.add_argument("--fastest", action="store_true",
                        help="each run's fastest repeat, and the fastest run of each tree "
                             "(others' load only adds time), instead of medians")
    parser.add_argument("args", nargs="*", help="bench_assignor.py's arguments (after --)")
    options = parser.parse_args()
    if options.fastest:
        options.args = ["--fastest", *options.args]
    summary = min if options.fastest else statistics.median
    head = trees.head()
    results: dict[str, list[Rows]] = {"base": [], "this": []}
    with trees.older(options.base) as base:
        for index in range(options.repeat):
            for name, tree in (("base", base), ("this", ROOT)):
                print(f"run {index + 1}/{options.repeat}: {name} ({tree})", file=sys.stderr,
                      flush=True)
                results[name].append(run(tree, options.args))
    rounds = list(results["this"][0])
    print(f"bench_assignor.py {' '.join(options.args)}; base {options.base}, this {head} "
          f"(working tree); {'fastest' if options.fastest else 'median'} of "
          f"{options.repeat} run(s) each, ms\n")
    print(f"| round | {options.base} warm | {head} warm | ratio | {options.base} cached | "
          f"{head} cached | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in rounds:
        cells = []
        for column in (0, 1):
            base_ms = summary(r[name][column] for r in results["base"] if name in r)
            this_ms = summary(r[name][column] for r in results["this"] if name in r)
            cells.append(f"{base_ms:.1f} | {this_ms:.1f} | {this_ms / base_ms:.2f}")
        print(f"| {name} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
