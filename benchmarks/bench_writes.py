"""ConfigMap writes per disruption, an older commit and this tree side by side in one run.

    .venv/bin/python benchmarks/bench_writes.py [--base COMMIT] [--repeat 1] [-- ARGS]

Runs ``bench_operator.py`` (this tree's bench, ``ARGS`` passed on; default: 1,000 members,
100,000 tasks, ``--gc-freeze``) on the operator of ``--base`` (``git archive`` of its
``operator/`` into a temporary directory) and on this tree's, in turn (base, this, base,
...), and prints one table: per disruption, the last ConfigMap's latency, the ConfigMaps
written in the disruption's first round, and the ConfigMap writes until converged against
the members whose assignment changed (docs/protocol.md, "Which documents a round writes").
"""

from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import sys

import trees

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_operator.py"

SECTION = re.compile(r"^(\w+) -> written: n=\d+")
FIELDS = {
    "last ConfigMap p50 (ms)": re.compile(r"last ConfigMap written: p50=(\d+)ms"),
    "last ConfigMap p99 (ms)": re.compile(r"last ConfigMap written: p50=\d+ms p99=(\d+)ms"),
    "operator CPU p50 (ms)": re.compile(r"CPU until the status: p50=(\d+)ms"),
    "ConfigMaps in the first round, median": re.compile(r"in that round: median (\d+)"),
    "ConfigMaps in the first round, max": re.compile(r"in that round: median \d+ \(max (\d+)\)"),
    "ConfigMap writes until converged": re.compile(r"assignment changed: median (\d+) for"),
    "members whose assignment changed": re.compile(r"assignment changed: median \d+ for (\d+)"),
    "writes / changed members, median": re.compile(r"ratio median ([\d.]+)"),
    "writes / changed members, max": re.compile(r"ratio median [\d.]+ max ([\d.]+)"),
}


def parse(text: str) -> dict[tuple[str, str], float]:
    """(disruption, field) → value, from one ``bench_operator.py`` output."""
    found: dict[tuple[str, str], float] = {}
    section = ""
    for line in text.splitlines():
        match = SECTION.match(line)
        if match:
            section = match.group(1)
            continue
        for name, pattern in FIELDS.items():
            value = pattern.search(line)
            if section and value:
                found[(section, name)] = float(value.group(1))
    return found


def run(tree: pathlib.Path, args: list[str]) -> dict[tuple[str, str], float]:
    return parse(trees.run(tree, [str(BENCH), "--tree", str(tree), *args]))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", default="5c463f7",
                        help="the older commit (default 5c463f7, the last before this change)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tree")
    parser.add_argument("args", nargs="*", help="bench_operator.py's arguments (after --)")
    options = parser.parse_args()
    args = options.args or ["--gc-freeze"]
    head = trees.head()
    results: dict[str, list[dict[tuple[str, str], float]]] = {"base": [], "this": []}
    with trees.older(options.base) as base:
        for _ in range(options.repeat):
            for name, tree in (("base", base), ("this", ROOT)):
                print(f"running {name} ({tree})", file=sys.stderr, flush=True)
                results[name].append(run(tree, args))
    keys = sorted({key for runs in results.values() for found in runs for key in found},
                  key=lambda k: (k[0], list(FIELDS).index(k[1])))
    print(f"bench_operator.py {' '.join(args)}; base {options.base}, this {head}"
          f" (working tree); median of {options.repeat} run(s) each\n")
    print(f"| disruption | measure | {options.base} | {head} |")
    print("|---|---|---|---|")
    for key in keys:
        cells = []
        for name in ("base", "this"):
            values = [found[key] for found in results[name] if key in found]
            cells.append(f"{statistics.median(values):g}" if values else "")
        print(f"| {key[0]} | {key[1]} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
