"""``kooper analyze EVENTS... --out report/``: pause, moves and convergence with PySpark.

Spark is imported only when the command runs, so ``kooper --help`` and the
other commands work without the ``analytics`` extra.
"""

from __future__ import annotations

import argparse

from kooper.analytics import options
from kooper.core import errors

HELP = "compute pause, moves and convergence from event logs with PySpark"


class MissingExtraError(errors.KooperError):
    """The analytics dependencies (pyspark, pyarrow, matplotlib) are not installed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Event logs, output folder, Spark master and configuration (the job's own options)."""
    options.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the job and print one line per run; exit 1 if any resource overlapped."""
    try:
        from kooper.analytics import job
    except ImportError as exc:
        raise MissingExtraError(
            f"needs the analytics extra ({exc.name} is missing): pip install 'kooper[analytics]'"
        ) from exc
    result = job.run(
        args.events,
        out=args.out,
        master=args.master,
        conf=options.parse_conf(args.conf),
        with_plots=not args.no_plots,
    )
    for row in result.metrics:
        converge = "–" if row["converge_ms"] is None else f"{row['converge_ms']} ms"
        print(
            f"{row['run']} [{row['protocol']}/{row['policy']}]: "
            f"pause {row['total_pause_ms']} ms (max {row['max_pause_ms']},"
            f" undisturbed {row['undisturbed_pause_ms']}), rounds {row['rounds']},"
            f" moves {row['moves']}, converge {converge}, overlaps {row['overlaps']}"
        )
    print(f"report: {result.out / 'report.md'} ({len(result.files)} files)")
    return 1 if any(row["overlaps"] for row in result.metrics) else 0

