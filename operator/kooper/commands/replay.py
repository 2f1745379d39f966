"""``kooper replay SCENARIO.json``: what the assignor does, round by round."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kooper.core import replay

HELP = "replay a KIP-415 scenario file through the real assignor"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command line."""
    parser.add_argument("scenario", type=Path, help="scenario JSON file (docs/scenarios.md)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--check", action="store_true", help="compare each round with its expect block"
    )


def run(args: argparse.Namespace) -> int:
    """Replay, print, and with ``--check`` exit 1 on the first mismatches."""
    path: Path = args.scenario
    try:
        scenario = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise replay.ScenarioError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    try:
        result = replay.replay(scenario)
    except replay.ScenarioError as exc:
        raise replay.ScenarioError(f"{path}: {exc}") from exc
    if args.format == "json":
        print(json.dumps(replay.to_json(result), indent=2))
    else:
        print(replay.to_table(result))
    if args.check:
        problems = replay.check(result)
        for problem in problems:
            print(f"MISMATCH {problem}", file=sys.stderr)
        if problems:
            return 1
        print(f"check: {len(result.rounds)} rounds match their expectations", file=sys.stderr)
    return 0
