"""The drill event log: one row schema for every source.

The simulator, the embedded cluster's recorder, a kind drill's recorder and the
operator's audit log all write these rows (JSON lines, or Parquet with the same
columns); ``kooper analyze`` reads them. Definitions are in ``docs/events.md``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any


class Kind(enum.StrEnum):
    """What happened."""

    START = "start"
    """``member`` started running ``resource`` (at ``epoch``)."""
    STOP = "stop"
    """``member`` stopped running ``resource``."""
    ROUND = "round"
    """The leader completed a rebalance round (``generation``); member/resource empty."""
    JOIN = "join"
    """``member`` joined the group."""
    LEAVE = "leave"
    """``member`` left the group (or was declared departed)."""
    PAUSE = "pause"
    """``member`` paused ``resource`` (its connector's state became ``paused``): it stays
    assigned to and held by ``member``, it only stops processing. Still running for
    every metric."""
    RESUME = "resume"
    """``member`` let a paused ``resource`` process again."""


SAME_INSTANT_ORDER: Mapping[Kind, int] = {
    Kind.STOP: 0,
    Kind.LEAVE: 1,
    Kind.ROUND: 2,
    Kind.JOIN: 3,
    Kind.START: 4,
    Kind.PAUSE: 5,
    Kind.RESUME: 6,
}
"""How rows with the same ``ts_ms`` are ordered (``docs/events.md``, "Ties"): a
hand-over at one instant is no pause, a member that joins and starts at one
instant starts in its new life, and a resource started paused starts first."""


COLUMNS: tuple[str, ...] = (
    "ts_ms",
    "run",
    "group",
    "member",
    "resource",
    "event",
    "generation",
    "epoch",
    "protocol",
    "policy",
)
"""Column order of the event log (Parquet and JSON lines)."""


LONG_COLUMNS = ("ts_ms", "generation", "epoch")
"""Integer columns: signed 64-bit longs."""
STRING_COLUMNS = ("run", "group", "member", "resource", "event", "protocol", "policy")
REQUIRED = ("ts_ms", "run", "event")
"""Columns every row has (not null); the others default (``Event``'s defaults)."""
NEEDS_MEMBER = frozenset({"start", "stop", "pause", "resume", "join", "leave"})
NEEDS_RESOURCE = frozenset({"start", "stop", "pause", "resume"})
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def row_problem(row: object) -> str | None:
    """Why one decoded JSON value is not an event row (``docs/events.md``), or ``None``.

    Every reader asks this: ``kooper analyze`` before Spark starts, and ``Event.from_row``
    (so the Python checks read no row that analyze refuses).
    """
    if not isinstance(row, Mapping):
        return f"not a JSON object (a {type(row).__name__})"
    for column in LONG_COLUMNS:
        value = row.get(column)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool)
            or not _LONG_MIN <= value <= _LONG_MAX
        ):
            return f"column {column!r} is {value!r}, expected an integer"
    for column in STRING_COLUMNS:
        value = row.get(column)
        if value is not None and not isinstance(value, str):
            return f"column {column!r} is {value!r}, expected a string"
    for column in REQUIRED:
        if row.get(column) is None:
            return f"column {column!r} is missing"
    return kind_problem(row["event"], row.get("member"), row.get("resource"))


def kind_problem(kind: str, member: str | None, resource: str | None) -> str | None:
    """Why a row of this ``event`` kind is incomplete (unknown kind, no member/resource)."""
    if kind not in _KINDS:
        return f"unknown event {kind!r} (expected one of {', '.join(_KINDS)})"
    if kind in NEEDS_MEMBER and not member:
        return f"a {kind} row without 'member'"
    if kind in NEEDS_RESOURCE and not resource:
        return f"a {kind} row without 'resource'"
    return None


_KINDS: tuple[str, ...] = tuple(str(kind) for kind in Kind)


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One row of the event log."""

    ts_ms: int
    run: str
    group: str
    member: str
    resource: str
    event: Kind
    generation: int = -1
    epoch: int = -1
    protocol: str = ""
    policy: str = ""

    def to_row(self) -> dict[str, Any]:
        """The row as a plain dict with ``event`` as a string."""
        row = dataclasses.asdict(self)
        row["event"] = str(self.event)
        return row

    def to_json(self) -> str:
        """One JSON line (no trailing newline)."""
        return json.dumps(self.to_row(), separators=(",", ":"))

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Event:
        """Parse a row; raises ``ValueError`` saying what does not fit (``row_problem``).

        Missing optional columns and nulls take their defaults.
        """
        problem = row_problem(row)
        if problem is not None:
            raise ValueError(problem)
        return cls(
            ts_ms=row["ts_ms"],
            run=row["run"],
            group=row.get("group") or "",
            member=row.get("member") or "",
            resource=row.get("resource") or "",
            event=Kind(row["event"]),
            generation=_or(row.get("generation"), -1),
            epoch=_or(row.get("epoch"), -1),
            protocol=row.get("protocol") or "",
            policy=row.get("policy") or "",
        )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def dump_lines(events: Iterable[Event]) -> Iterator[str]:
    """Encode events as JSON lines (each ends with a newline)."""
    for event in events:
        yield event.to_json() + "\n"


def load_lines(lines: Iterable[str]) -> Iterator[Event]:
    """Decode JSON lines, skipping blank ones."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield Event.from_row(json.loads(line))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"line {number}: {exc}") from exc
