"""``kooper replay SCENARIO.json``: what the assignor does, round by round."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kooper.commands import options
from kooper.control import replay

HELP = "replay a KIP-415 scenario file through the real assignor"

_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command line."""
    parser.add_argument("scenario", type=Path,
                        help="scenario JSON file, UTF-8 (docs/scenarios.md)")
    options.add_output(parser, aliases=("--format",))
    parser.add_argument(
        "--check", action="store_true",
        help="compare each round with its expect block; exit 1 on a mismatch"
    )


def decode(path: Path, data: bytes) -> Any:
    """The scenario document in ``data``; ``ScenarioError`` names what is wrong with it."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            raise replay.ScenarioError(
                f"{path}: starts with a {encoding} byte-order mark; save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise replay.ScenarioError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            f"a scenario is a JSON file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise replay.ScenarioError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise replay.ScenarioError(f"{path}: JSON nested too deeply for a scenario") from None


def table(result: replay.Replay) -> str:
    """One block per round, then the summary; times in seconds."""
    lines: list[str] = []
    width = max((len(m) for r in result.rounds for m in r.members), default=6)
    for r in result.rounds:
        lines.append(f"round {r.round}  at {options.seconds(r.now_ms)}  "
                     f"protocol {r.protocol}  generation {r.generation}")
        for member, part in sorted(r.members.items()):
            assigned = ", ".join(part.assigned.sorted()) or "-"
            revoked = ", ".join(part.revoked.sorted()) or "-"
            lines.append(f"  {member:<{width}}  delay {options.seconds(part.delay_ms):>8}  "
                         f"assigned: [{assigned}]  revoked: [{revoked}]")
    s = result.summary
    lines.append(f"summary: {s.rounds} rounds, {s.moves} moves, unassigned "
                 f"{s.unassigned_ms / 1000:.1f} resource-seconds (resources x time)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Replay, print, and with ``--check`` exit 1 on the first mismatches."""
    path: Path = args.scenario
    scenario = decode(path, path.read_bytes())
    try:
        result = replay.replay(scenario)
    except replay.ScenarioError as exc:
        raise replay.ScenarioError(f"{path}: {exc}") from None
    if args.output == "table":
        print(table(result))
    else:
        print(options.dump(replay.to_json(result), args.output))
    if args.check:
        problems = replay.check(result)
        for problem in problems:
            print(f"MISMATCH {problem}", file=sys.stderr)
        if problems:
            return 1
        print(f"check: {len(result.rounds)} rounds match their expectations", file=sys.stderr)
    return 0
