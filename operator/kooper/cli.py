"""The ``kooper`` command: one subcommand per module under ``kooper.commands``.

Each command module defines ``HELP: str``, ``add_arguments(parser)`` and
``run(args) -> int``. Modules are imported only when their command runs, so
``kooper worker`` never imports the operator's or the analytics' dependencies.
Whatever goes wrong, the user gets one line on stderr and a non-zero exit, never
a traceback: a bad flag or input is exit 1 (``KooperError``, ``OSError``, argparse),
as with kubectl and helm; anything else an "internal error" line, exit 70
(``KOOPER_DEBUG=1`` re-raises it with its traceback). A command that ran and found a
problem it checks for (``drill`` violations, ``replay --check`` mismatches,
``analyze`` overlaps) also exits 1, after printing what it found on stdout.

"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from kooper.core import errors

COMMANDS: dict[str, str] = {
    "demo": "run a rolling restart on an embedded cluster, three ways, and compare them",
    "drill": "simulate a drill (rolling restart, chaos, ...) and write its event log",
    "replay": "replay a KIP-415 scenario file through the real assignor",
    "analyze": "compute pause, moves and convergence from event logs with PySpark",
    "run": "run the operator against a Kubernetes cluster",
    "worker": "run a worker: the SDK with the demo connectors",
    "status": "print a worker group's members and their resources",
    "version": "print kooper's version and those of Python and kopf",
    "cluster": "start or stop a real local Kubernetes control plane (pods run as processes)",
}

DESCRIPTION = """\
kooper spreads connectors and their tasks over the pods of a worker group with
incremental cooperative rebalancing (Kafka Connect's KIP-415): a pod restart
or a rolling upgrade moves only what has to move, and no task runs twice.
"""

EPILOG = """\
try it without a cluster:
  kooper demo                            the embedded cluster: one rolling restart, three ways
  kooper drill rolling-restart --sim     the same on the simulator, at any scale
  kooper replay tests/scenarios/kip415/worker_bounces.json

on a cluster (helm install kooper charts/kooper, docs/operator.md):
  kooper run                             the operator, against your kubeconfig's context
  kooper status demo -n kooper           a group's members and what each runs

Tables print seconds with units; -o json|yaml prints exact numbers (*_ms keys).
Progress goes to stderr, results to stdout; errors are one line, exit 1 (a bug: 70).
`kooper COMMAND --help` explains each command.
"""

USAGE_ERROR = 1
"""Exit status of a bad flag, input or environment, as kubectl's and helm's (argparse's
own 2 is not used: scripts around kubectl and helm test for 1)."""

INTERNAL_ERROR = 70
"""Exit status of a bug (sysexits' EX_SOFTWARE): not the user's fault."""


class UsageError(errors.KooperError):
    """The command line or an input file is wrong: print one line, exit 1."""


class BadCommandLine(SystemExit):
    """argparse rejected the command line (its one line is already on stderr): exit 1."""


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: the message and where to read more."""

    def error(self, message: str) -> NoReturn:
        """``kooper drill: error: argument --pods: ...; see 'kooper drill --help'``."""
        print(f"{self.prog}: error: {message}; see '{self.prog} --help'", file=sys.stderr)
        raise BadCommandLine(USAGE_ERROR)


def _load(name: str) -> ModuleType:
    return importlib.import_module(f"kooper.commands.{name}")


def build_parser(argv: Sequence[str], *, every_command: bool = False) -> argparse.ArgumentParser:
    """The parser; only the chosen command's module is imported (all: ``every_command``)."""
    parser = Parser(prog="kooper", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true",
                        help="print kooper's version and exit (more: kooper version)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, help_text in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if every_command or name == chosen:
            _load(name).add_arguments(cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kooper`` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    try:
        args = parser.parse_args(args_list)
    except BadCommandLine:
        return USAGE_ERROR
    if args.version:
        print(_load("version").line())
        return 0
    if args.command is None:
        parser.print_help()
        return 0
    where = f"kooper {args.command}"
    try:
        code: int = _load(args.command).run(args)
    except errors.KooperError as exc:
        print(f"{where}: error: {_one_line(str(exc))}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:
        # `kooper ... | head`: the reader left; say nothing, like other Unix tools.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        print(f"{where}: error: {_one_line(_os_error(exc))}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("KOOPER_DEBUG"):
            raise
        print(f"{where}: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
              f"(a bug: KOOPER_DEBUG=1 shows the traceback)", file=sys.stderr)
        return INTERNAL_ERROR
    return code


def _os_error(exc: OSError) -> str:
    """``/x: No such file or directory`` rather than ``[Errno 2] No such file ...: '/x'``."""
    if exc.strerror and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc.strerror or exc)


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
