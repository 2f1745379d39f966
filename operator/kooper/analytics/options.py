"""The job's command-line options, shared by ``kooper analyze`` and ``spark-submit job.py``.

No Spark import here: ``kooper --help`` builds its parser without the analytics extra.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from kooper.analytics import errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Event logs, output folder, Spark master and configuration, ``--no-plots``."""
    parser.add_argument(
        "events",
        nargs="+",
        metavar="EVENTS",
        help="event logs: *.jsonl, *.json or *.parquet files, or folders of them",
    )
    parser.add_argument("--out", default="report", help="output folder (default: report)")
    parser.add_argument(
        "--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])"
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration, repeatable",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")


def parse_conf(pairs: Sequence[str]) -> list[tuple[str, str]]:
    """``KEY=VALUE`` strings as pairs; raises ``AnalyticsError`` on a malformed one."""
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise errors.AnalyticsError(f"--conf {pair!r}: expected KEY=VALUE")
        out.append((key.strip(), value))
    return out
