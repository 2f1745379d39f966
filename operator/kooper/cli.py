"""The ``kooper`` command: one subcommand per module under ``kooper.commands``.

Each command module defines ``HELP: str``, ``add_arguments(parser)`` and
``run(args) -> int``. Modules are imported only when their command runs, so
``kooper worker`` never imports the operator's or the analytics' dependencies.
Any ``KooperError`` or ``OSError`` becomes one clear line on stderr and exit 2:
users get a message, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from kooper.core import errors

COMMANDS: dict[str, str] = {
    "replay": "replay a KIP-415 scenario file through the real assignor",
    "run": "run the operator (kopf) against the current Kubernetes context",
    "worker": "run a worker: the SDK with the demo connectors",
    "status": "print a worker group's members and their resources",
    "demo": "run the embedded-cluster drill: compatible/kooper vs kip415 vs eager",
    "drill": "simulate a drill (rolling restart, chaos, ...) and write its event log",
    "analyze": "compute pause, moves and convergence from event logs with PySpark",
}


class UsageError(errors.KooperError):
    """The command line or an input file is wrong: print one line, exit 2."""


def _load(name: str) -> ModuleType:
    return importlib.import_module(f"kooper.commands.{name}")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser; only the chosen command's module is imported."""
    parser = argparse.ArgumentParser(prog="kooper", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, help_text in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            _load(name).add_arguments(cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kooper`` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    try:
        code: int = _load(args.command).run(args)
    except errors.KooperError as exc:
        print(f"kooper {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"kooper {args.command}: error: {_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kooper {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())


def _os_error(exc: OSError) -> str:
    """``/x: No such file or directory`` rather than ``[Errno 2] No such file ...: '/x'``."""
    if exc.strerror and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc.strerror or exc)
