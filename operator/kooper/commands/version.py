"""``kooper version``: kooper's version (package metadata), Python's, and kopf's if installed."""

from __future__ import annotations

import argparse
import importlib.metadata
import platform

import kooper
from kooper.commands import options

HELP = "print kooper's version and those of Python and kopf"

OPTIONAL = ("kopf", "pyspark")
"""Dependencies worth naming in a bug report, when installed (workers have neither)."""


_DISPLAY = {"python": "Python"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``-o`` only."""
    options.add_output(parser)


def installed(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """``{"kooper": ..., "python": ..., "kopf": ... or None, ...}``."""
    return {
        "kooper": installed("kooper") or kooper.__version__,
        "python": platform.python_version(),
        **{name: installed(name) for name in OPTIONAL},
    }


def line() -> str:
    """``kooper 0.1.0 (Python 3.11.2, kopf 1.45.2)``: what ``--version`` prints."""
    found = versions()
    extras = ", ".join(f"{_DISPLAY.get(name, name)} {version}"
                       for name, version in found.items() if name != "kooper" and version)
    return f"kooper {found['kooper']} ({extras})"


def run(args: argparse.Namespace) -> int:
    """Print the versions."""
    if args.output == "table":
        print(line())
    else:
        print(options.dump(versions(), args.output))
    return 0
