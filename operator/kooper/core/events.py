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
        """Parse a row; raises ``ValueError``/``KeyError`` naming the bad column."""
        try:
            return cls(
                ts_ms=int(row["ts_ms"]),
                run=str(row["run"]),
                group=str(row.get("group", "") or ""),
                member=str(row.get("member", "") or ""),
                resource=str(row.get("resource", "") or ""),
                event=Kind(row["event"]),
                generation=_int_or(row.get("generation"), -1),
                epoch=_int_or(row.get("epoch"), -1),
                protocol=str(row.get("protocol", "") or ""),
                policy=str(row.get("policy", "") or ""),
            )
        except KeyError as exc:
            raise ValueError(f"missing column {exc.args[0]!r}") from exc


def _int_or(value: object, default: int) -> int:
    return default if value is None else int(str(value))


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
