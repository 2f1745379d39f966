"""What every command shares: checked argument types, ``-o table|json|yaml``, durations.

Argument types raise ``argparse.ArgumentTypeError``, so argparse names the flag
in its message (``argument --pods: must be at least 1, got -5``). Durations are
milliseconds inside kooper; people write them with their unit (``--delay 5s``,
:func:`duration`, the CRDs' language) and read seconds with their unit
(:func:`seconds`), machines read the exact milliseconds under ``*_ms`` keys.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kooper.core import durations, errors

FORMATS = ("table", "json", "yaml")


def int_at_least(minimum: int, *, at_most: tuple[int, str] | None = None
                 ) -> Callable[[str], int]:
    """An ``int`` argument type that rejects values below ``minimum`` (and above
    ``at_most``'s bound, whose text says where the bound comes from)."""

    def parse(text: str) -> int:
        value = _int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if at_most is not None and value > at_most[0]:
            raise argparse.ArgumentTypeError(
                f"must be at most {at_most[0]} ({at_most[1]}), got {value}")
        return value

    parse.__name__ = "int"  # argparse says "invalid int value: 'x'" for a non-number
    return parse


def port(text: str) -> int:
    """A TCP port, 0 (off) to 65535."""
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 (off) to 65535, got {value}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def duration(text: str) -> int:
    """A duration flag (``--delay 5s``, ``1m30s``, ``250ms``) in milliseconds, parsed by
    ``core.durations``: the same language as the CRDs' duration fields."""
    try:
        return durations.parse_ms(text)
    except errors.InvalidDurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_duration(text: str) -> int:
    """A :func:`duration` longer than zero."""
    value = duration(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be longer than 0s, got {text!r}")
    return value


def whole_seconds(text: str) -> int:
    """A positive :func:`duration` of whole seconds (a Lease counts in seconds), in seconds."""
    value = positive_duration(text)
    if value % 1000:
        raise argparse.ArgumentTypeError(f"must be whole seconds, such as 15s, got {text!r}")
    return value // 1000


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def add_output(parser: argparse.ArgumentParser, *, aliases: Sequence[str] = ()) -> None:
    """``-o/--output table|json|yaml``: a table for people, JSON or YAML for programs."""
    parser.add_argument("-o", "--output", *aliases, dest="output", choices=FORMATS,
                        default="table",
                        help="table for people (seconds with units), or json/yaml for "
                             "programs (exact numbers, durations in *_ms keys; "
                             "default: table)")


def dump(document: Any, output: str) -> str:
    """``document`` as JSON or YAML text (keys in the order given)."""
    if output == "json":
        return json.dumps(document, indent=2)
    if output == "yaml":
        import yaml  # kopf's dependency; imported only when asked for

        text: str = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        return text.rstrip("\n")
    raise ValueError(f"not a machine-readable format: {output!r}")


def seconds(ms: float | None, *, digits: int = 1) -> str:
    """``647621`` -> ``"647.6 s"``; ``None`` -> ``"-"``."""
    if ms is None:
        return "-"
    return f"{ms / 1000:.{digits}f} s"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *,
          left: int = 1) -> str:
    """Columns padded to their widest cell; the first ``left`` columns left-aligned."""
    cells = [list(header), *[list(row) for row in rows]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) if i < left else cell.rjust(width)
                  for i, (cell, width) in enumerate(zip(line, widths, strict=True))).rstrip()
        for line in cells
    )


def progress(message: str) -> None:
    """One line of progress on stderr (results go to stdout)."""
    print(message, file=sys.stderr, flush=True)


def writable_file(path: Path, flag: str) -> Path:
    """``path`` if its folder exists; never creates folders behind the user's back."""
    parent = path.parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise errors.KooperError(f"{flag} {path}: folder {parent} {what} (create it first)")
    if path.is_dir():
        raise errors.KooperError(f"{flag} {path}: is a folder, expected a file")
    return path


def exact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A plain ``dict`` copy for ``dump`` (dataclass dicts, enum values as text)."""
    return {key: (str(value) if hasattr(value, "value") else value)
            for key, value in mapping.items()}
