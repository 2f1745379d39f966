"""Which ConfigMap writes a join makes, in the simulator: bench_operator.py's sequence
(departures, then joins) with every document classified.

    .venv/bin/python benchmarks/bench_join_writes.py [--members 300] [--tasks 30000]
        [--departures 20] [--joins 10] [--base COMMIT]

``--members`` pods, ``--tasks / 100`` connectors of 100 tasks, no rebalance delay; each
departure (a scale-down by one) and each join (a scale-up by one) gets 30 s of simulated
time. Per disruption: the documents written, the members whose assignment changed (first
to last document of the window), their ratio (issue 23's target for a join: <= 1.1), the
generations written, the most documents one member got, and each write by what it tells
the member compared with its previous document (it receives work / a new revocation /
its assignment only shrinks / only its revoked set changed / nothing of that).
``--base COMMIT``: the same sequence on that commit's ``operator/`` and on this tree's,
one after the other in this run, as one table of documents per changed member.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

import trees
from kooper.core import model
from kooper.protocol import messages
from kooper.sim import runner, scenarios

WINDOW_MS = 30_000
S = scenarios


def kind_of(previous: messages.Assignment | None, now: messages.Assignment) -> str:
    if previous is None:
        return "first document"
    was, got = previous.assigned, now.assigned
    if not (got.connectors <= was.connectors and got.tasks <= was.tasks):
        return "receives work"
    if now.revoked and now.revoked != previous.revoked:
        return "new revocation"
    if got != was:
        return "assignment only shrinks"
    if now.revoked != previous.revoked:
        return "revoked set only"
    return "nothing of that"


def side_by_side(base: str, arguments: list[str]) -> int:
    """Run this script on ``base``'s operator and on this tree's; one table of both."""
    script = str(pathlib.Path(__file__).resolve())
    found: dict[str, list[dict[str, object]]] = {}
    with trees.older(base) as older:
        for name, tree in ((base, older), (trees.head(), trees.ROOT)):
            out = trees.run(tree, [script, *arguments, "--json"], echo=False)
            found[name] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    (old, old_rows), (new, new_rows) = found.items()
    print(f"bench_join_writes.py {' '.join(arguments)}; base {old}, this {new} (working tree)\n")
    print(f"| disruption | {old}: documents / changed | ratio | generations "
          f"| {new}: documents / changed | ratio | generations |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for a, b in zip(old_rows, new_rows, strict=True):
        cells = [f"{r['documents']} / {r['changed']} | {r['ratio']:.2f} | {r['generations']}"
                 for r in (a, b)]
        print(f"| {a['disruption']} | {cells[0]} | {cells[1]} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--members", type=int, default=300)
    parser.add_argument("--tasks", type=int, default=30_000)
    parser.add_argument("--departures", type=int, default=20)
    parser.add_argument("--joins", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--base", help="also run COMMIT's operator, side by side")
    parser.add_argument("--json", action="store_true", help="one JSON row per disruption")
    options = parser.parse_args()
    if options.base:
        arguments = [a for a in sys.argv[1:] if a not in (options.base, "--base")
                     and not a.startswith("--base=")]
        return side_by_side(options.base, arguments)
    steps = [S.Step(S.Action.SCALE_DOWN, count=1, delay_ms=WINDOW_MS)
             for _ in range(options.departures)]
    steps += [S.Step(S.Action.SCALE_UP, count=1, delay_ms=WINDOW_MS)
              for _ in range(options.joins)]
    log: list[tuple[int, str, messages.Assignment | None, messages.Assignment]] = []
    # (``--base`` runs this script on an older tree, where the method was ``_write``.)
    method = "write_document" if hasattr(runner.Sim, "write_document") else "_write"
    write = getattr(runner.Sim, method)

    def logged(self: runner.Sim, message: messages.Assignment) -> None:
        log.append((self.clock.now_ms, message.member, self.written.get(message.member),
                    message))
        write(self, message)

    setattr(runner.Sim, method, logged)
    config = runner.Config(pods=options.members, connectors=options.tasks // 100, tasks=100,
                           seed=options.seed, delay_ms=0, warmup_ms=WINDOW_MS)
    result = runner.simulate(config, S.Scenario("joins", tuple(steps)))
    print(f"{options.members} members, {options.tasks // 100} connectors x 100 tasks, seed "
          f"{options.seed}; "
          f"violations {len(result.violations)}\n")
    print("| disruption | documents | members whose work changed | ratio | generations | "
          "most to one member | by what the document tells |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for index in range(options.departures + options.joins):
        lo = WINDOW_MS * (index + 1)
        window = [row for row in log if lo <= row[0] < lo + WINDOW_MS]
        first: dict[str, model.ConnectorsAndTasks] = {}
        last: dict[str, model.ConnectorsAndTasks] = {}
        kinds: collections.Counter[str] = collections.Counter()
        per: collections.Counter[str] = collections.Counter()
        for _, member, previous, message in window:
            first.setdefault(member, previous.assigned if previous else model.EMPTY)
            last[member] = message.assigned
            kinds[kind_of(previous, message)] += 1
            per[member] += 1
        changed = sum(1 for member, now in last.items() if now != first[member])
        label = ("departure" if index < options.departures else "join") + f" {index + 1}"
        told = ", ".join(f"{k} {n}" for k, n in kinds.most_common())
        generations = len({row[3].generation for row in window})
        if options.json:
            print(json.dumps({"disruption": label, "documents": len(window), "changed": changed,
                              "ratio": len(window) / max(1, changed),
                              "generations": generations}), flush=True)
            continue
        print(f"| {label} | {len(window)} | {changed} | {len(window) / max(1, changed):.2f} | "
              f"{generations} | {max(per.values(), default=0)} | {told} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
