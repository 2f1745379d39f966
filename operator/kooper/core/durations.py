"""Durations: the one language kooper accepts, on the CRDs and on the command line (pure).

A duration is one or more ``<number><unit>`` parts, the number a decimal without sign
or exponent, the unit ``ms``, ``s``, ``m`` or ``h``: ``300s``, ``5m``, ``1m30s``,
``1.5h``, ``250ms``, ``0s``. That is Go's ``time.ParseDuration`` (which the API server's
CEL ``duration()`` uses) minus what kooper cannot honour or would guess at: no sign,
no bare ``0``, no units below a millisecond (``ns``, ``us``, ``µs``), no spaces.

``PATTERN`` and ``MAX_LENGTH`` are the CRDs' ``pattern`` and ``maxLength`` for every
duration field; ``tests/chart/test_durations_agree.py`` checks both CRDs carry them and
that admission and :func:`parse_ms` accept exactly the same strings. Values are
milliseconds (fractions of a millisecond are cut), at most Go's longest duration.
"""

from __future__ import annotations

import fractions
import re

from kooper.core import errors

PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
"""The CRDs' ``pattern`` for a duration field (a JSON-schema, ECMA 262 regex)."""
MAX_LENGTH = 32
"""The CRDs' ``maxLength`` for a duration field."""
MAX_MS = (2**63 - 1) // 1_000_000
"""Go's longest ``time.Duration`` (about 292 years): CEL's ``duration()`` refuses more."""
UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000}
EXAMPLE = "such as 300s, 5m, 1m30s or 250ms"

_WHOLE = re.compile(PATTERN)
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")


def parse_ms(text: str) -> int:
    """``"1m30s"`` -> ``90000``; anything outside the language raises ``InvalidDurationError``."""
    if len(text) > MAX_LENGTH or not _WHOLE.fullmatch(text):
        raise errors.InvalidDurationError(
            f"{text!r} is not a duration: expected a number and a unit (ms, s, m, h), "
            f"{EXAMPLE}")
    total = sum((fractions.Fraction(number) * UNIT_MS[unit]
                 for number, unit in _PART.findall(text)), fractions.Fraction(0))
    if total > MAX_MS:
        raise errors.InvalidDurationError(f"{text!r} is longer than the longest duration "
                                          f"(about 292 years)")
    return int(total)


def format_ms(ms: int) -> str:
    """``90000`` -> ``"1m30s"``; ``0`` -> ``"0s"`` (what :func:`parse_ms` reads back)."""
    if ms < 0:
        raise ValueError(f"a duration is never negative, got {ms} ms")
    parts = []
    for unit in ("h", "m", "s", "ms"):
        count, ms = divmod(ms, UNIT_MS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
