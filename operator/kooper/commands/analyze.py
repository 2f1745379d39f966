"""``kooper analyze EVENTS... --out report/``: pause, moves and convergence with PySpark.

Spark is imported only when the command runs, so ``kooper --help`` and the
other commands work without the ``analytics`` extra. Progress goes to stderr,
one line per stage; the per-run results go to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from kooper.analytics import options
from kooper.core import errors

HELP = "compute pause, moves and convergence from event logs with PySpark"


class MissingExtraError(errors.KooperError):
    """The analytics dependencies (pyspark, pyarrow, matplotlib) are not installed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Event logs, output folder, Spark master and configuration (the job's own options)."""
    options.add_arguments(parser)


def progress_printer(
    stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic
) -> Callable[[str], None]:
    """A progress callback: ``kooper analyze [  1.2 s] <stage>`` lines on ``stream`` (stderr)."""
    started = clock()

    def emit(line: str) -> None:
        print(f"kooper analyze [{clock() - started:6.1f} s] {line}",
              file=stream or sys.stderr, flush=True)

    return emit


def _seconds(ms: object, unit: str = "s") -> str:
    return "–" if ms is None else f"{int(ms) / 1000:,.3f} {unit}"  # type: ignore[call-overload]


def summary_line(row: Mapping[str, Any]) -> str:
    """One run's results, durations in seconds with units."""
    return (
        f"{row['run']} [{row['protocol']}/{row['policy']}]: "
        f"pause {_seconds(row['total_pause_ms'], 'task-s')}"
        f" (max {_seconds(row['max_pause_ms'])},"
        f" undisturbed {_seconds(row['undisturbed_pause_ms'], 'task-s')}),"
        f" rounds {row['rounds']}, moves {row['moves']},"
        f" converge {_seconds(row['converge_ms'])}, overlaps {row['overlaps']}"
    )


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
        progress=progress_printer(),
    )
    for row in result.metrics:
        print(summary_line(row))
    print(f"report: {result.out / 'report.html'} and {result.out / 'report.md'}"
          f" ({len(result.files)} files)")
    return 1 if any(row["overlaps"] for row in result.metrics) else 0
