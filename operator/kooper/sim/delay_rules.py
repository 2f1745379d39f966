"""Every scheduled-rebalance delay honoured: ``check_delays``, one table of rules.

``check_delays`` judges the operator's audit rows (``control.audit.rows``, in the order
it wrote them) and the workers' rows (their ``start`` rows) against the run's policy
and delay alone; it knows nothing of the simulator's state.

A ``stop``/``lost`` row says that ``member`` departed holding ``resource``. While the
protocol promises that the resource waits for it, the resource is neither assigned
(an audit ``assigned`` row) nor started (a worker ``start`` row) on any *other*
member. The promise, with ``d`` = the configured delay:

* ``kip415`` (KIP-415, one delay for the group): a departure with no window open
  opens one ending at its ``ts_ms + d``; a departure inside an open window waits
  until that window's end (a member leaving 290 s into a 300 s delay gets 10 s). Work
  of a member that returns meanwhile waits too (it rejoins empty, as a candidate),
  though the member itself may start it (it is not *another* member). Planned
  departures wait as well: the KIP has no such notion. The window is the check's
  own, from the ``lost`` rows; what it cannot see, it reads from the ``round`` rows:
  a round row's ``until_ms`` is the operator's delay deadline after that round, its
  own ``ts_ms`` when nothing waits any more. Connect resets the delay once nothing
  is lost (a returning member that reports its work again: no row shows it), so a
  round row with nothing waiting closes the window; the next departure opens a new
  one. (A closed window only makes later promises longer.)
* ``kooper`` (a grace per departure): an ``unplanned`` departure's work waits
  ``grace_ms`` from its ``lost`` row, the grace the step chose before the assignor
  ran (``control.adaptive``, ``status.adaptive.graceSeconds``); the check takes it
  from the row and requires ``0 <= grace <= d``. A restarted operator announcing a
  departure again: the grace runs from the first announcement.

Every row is looked up in ``RULES`` by its ``Key`` (policy, row kind, departure kind,
cut/persisted state, eager or not); the first rule that matches says what the row does
(``Effect``) and why. Each exemption is one of those rules, so a test can list them.
A wait also ends once the resource is assigned back to its departed member, or that
member starts it (the round that gave it back may have died before its audit rows: a
worker starts only what a document written for it assigns); ``d = 0`` promises nothing.

What it cannot judge: a departure decided only by a round that died between deleting
the member's ConfigMap and writing the status (its ``lost`` rows are cut, and the
restarted operator never learns of the departure).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kooper.core import events as ev
from kooper.core import model

KOOPER, KIP415 = model.Policy.KOOPER, model.Policy.KIP415


class Kind(enum.StrEnum):
    """What a row says, as the check reads it."""

    LOST = "lost"
    NOT_LOST = "not lost"
    """``kip415``: a ``lost`` row for work the same round revoked from another live
    member, which still held it (not in KIP-415's lost set)."""
    RELEASED = "released"
    ASSIGNED = "assigned"
    JOIN = "join"
    REVOKED = "revoked"
    ROUND = "round"
    OTHER = "other"
    """``leave`` and any other audit row."""
    START = "start"
    """A worker's ``start`` row."""


class Cut(enum.StrEnum):
    """Whether the row's round was finished, and if not what survived it."""

    KEPT = "kept"
    """The operator finished the round (a worker row too)."""
    PERSISTED = "cut, persisted"
    """The operator died in it after writing its status; no worker acted on it."""
    ACTED = "cut, acted on"
    """It died before the status, and some worker started something at its generation."""
    BOTH = "cut, persisted, acted on"
    IDLE = "cut"
    """It died before the status, and no worker acted on its documents."""


DEPARTURES = ("planned", "fenced", "unplanned", "")
"""A ``lost`` row's ``departure`` (empty: not a lost row, or a row without one)."""


class Effect(enum.Enum):
    """What a row does to the waits."""

    NOTHING = "nothing"
    END_ALL = "ends every wait and the window"
    WAIT_WINDOW = "waits until the group's window ends"
    WAIT_GRACE = "waits its grace from the departure's first announcement"
    HAND_OVER = "handed over at once: ends the member's wait for it"
    RELEASE = "ends the member's wait for it"
    JUDGE = "judged against the resource's wait"
    BACK = "the member is back: ends all its waits"
    ROUND = "a round: the window ends, or closes when nothing waits"


@dataclasses.dataclass(frozen=True, slots=True)
class Key:
    """What ``RULES`` are looked up by."""

    policy: model.Policy
    kind: Kind
    departure: str
    cut: Cut
    eager: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """Rows matching every field given (None: any) do ``effects``, for ``why``."""

    why: str
    effects: tuple[Effect, ...]
    policy: model.Policy | None = None
    kinds: frozenset[Kind] | None = None
    departures: frozenset[str] | None = None
    cuts: frozenset[Cut] | None = None
    eager: bool | None = None

    def matches(self, key: Key) -> bool:
        """Whether ``key`` is one of the rows this rule is about."""
        return ((self.policy is None or self.policy is key.policy)
                and (self.kinds is None or key.kind in self.kinds)
                and (self.departures is None or key.departure in self.departures)
                and (self.cuts is None or key.cut in self.cuts)
                and (self.eager is None or self.eager == key.eager))


def _set(*items: Any) -> frozenset[Any]:
    return frozenset(items)


_LOSSES = _set(Kind.LOST, Kind.NOT_LOST)
_ROUND_ROWS = frozenset(Kind).difference({Kind.START})
_NOT_LOSSES = _ROUND_ROWS - _LOSSES
E = Effect

RULES: tuple[Rule, ...] = (
    # Rows of a round the operator died in (``cut``: the simulator keeps them, since
    # workers may act on the documents it wrote).
    Rule("a cut round that wrote no status and whose documents nobody acted on changed "
         "nothing (the restarted operator still counts the departures it undid)",
         (E.NOTHING,), cuts=_set(Cut.IDLE)),
    Rule("a cut round's assignments count only when some worker acted on its documents",
         (E.NOTHING,), kinds=_NOT_LOSSES, cuts=_set(Cut.PERSISTED)),
    Rule("kooper: a cut round judged the departure planned and workers acted on it: it "
         "still ends the wait it supersedes", (E.HAND_OVER,), policy=KOOPER,
         kinds=_set(Kind.LOST), departures=_set("planned"), cuts=_set(Cut.ACTED), eager=False),
    Rule("kooper: the same, in an eager round", (E.END_ALL,), policy=KOOPER,
         kinds=_set(Kind.LOST), departures=_set("planned"), cuts=_set(Cut.ACTED), eager=True),
    Rule("a cut round's lost rows promise nothing unless its status was written first "
         "(a round declaring a departure whose work waits writes it first)",
         (E.NOTHING,), kinds=_LOSSES, cuts=_set(Cut.ACTED)),
    # The eager protocol has no scheduled rebalance (``assignor.eager`` plans with no lost
    # work and no delay).
    Rule("eager: a round that runs eager (a protocol change, an eager-only member) ends "
         "every wait, and its lost rows promise nothing", (E.END_ALL,), kinds=_ROUND_ROWS,
         eager=True),
    # kip415.
    Rule("kip415: KIP-415's lost set is the previous assignment less what the members "
         "report: what another live member still held is not lost", (E.NOTHING,),
         policy=KIP415, kinds=_set(Kind.NOT_LOST)),
    Rule("kip415: one delay for the group, planned departures included (the KIP has no "
         "such notion)", (E.WAIT_WINDOW,), policy=KIP415, kinds=_set(Kind.LOST)),
    Rule("kip415: a returning member rejoins empty, as a candidate: its lost work still "
         "waits", (E.NOTHING,), policy=KIP415, kinds=_set(Kind.JOIN, Kind.REVOKED)),
    Rule("kip415: a worker start is judged; the departed member may start its own work",
         (E.JUDGE,), policy=KIP415, kinds=_set(Kind.START)),
    # kooper.
    Rule("kooper: a planned or permanent departure (terminating pod, scale-down) hands "
         "its work over at once; a self-fenced member never left, its work goes back to "
         "it", (E.HAND_OVER,), policy=KOOPER, kinds=_set(Kind.LOST),
         departures=_set("planned", "fenced")),
    Rule("kooper: an unplanned departure's work waits the grace in its row",
         (E.WAIT_GRACE,), policy=KOOPER, kinds=_set(Kind.LOST)),
    Rule("kooper: a member that joins, or is told to stop something, is back (a restarted "
         "operator that found its ConfigMap never saw it go)", (E.BACK,), policy=KOOPER,
         kinds=_set(Kind.JOIN, Kind.REVOKED)),
    Rule("kooper: a worker start is judged, and a departed member that starts anything "
         "is back (it starts only what a document of its membership assigns)",
         (E.JUDGE, E.BACK), policy=KOOPER, kinds=_set(Kind.START)),
    # Both.
    Rule("a member known not to return (``released``: the scale-down came after the "
         "kill) releases what it lost", (E.RELEASE,), kinds=_set(Kind.RELEASED)),
    Rule("an assignment is judged", (E.JUDGE,), kinds=_set(Kind.ASSIGNED)),
    Rule("a round ends an expired window, or closes it when nothing waits",
         (E.ROUND,), kinds=_set(Kind.ROUND)),
    Rule("a leave changes nothing: its lost rows carry the departure", (E.NOTHING,),
         kinds=_set(Kind.OTHER)),
)


def rule_for(key: Key) -> Rule:
    """The first of ``RULES`` that matches ``key``."""
    for rule in RULES:
        if rule.matches(key):
            return rule
    raise LookupError(f"no rule for {key}")


def all_keys() -> list[Key]:
    """Every key a row can have (``rule_for`` answers each): departures on lost rows
    only, ``not lost`` under ``kip415`` only, worker rows neither cut nor eager."""
    found = []
    for policy, kind, departure, cut, eager in itertools.product(
            model.Policy, Kind, DEPARTURES, Cut, (False, True)):
        if (departure and kind not in _LOSSES) or (
                kind is Kind.NOT_LOST and policy is not KIP415) or (
                kind is Kind.START and (cut is not Cut.KEPT or eager)):
            continue
        found.append(Key(policy, kind, departure, cut, eager))
    return found


_KINDS = {"lost": Kind.LOST, "released": Kind.RELEASED, "assigned": Kind.ASSIGNED,
          "join": Kind.JOIN, "revoked": Kind.REVOKED, "round": Kind.ROUND}


def key_of(row: Mapping[str, Any], *, policy: model.Policy, acted: set[int],
           held: Mapping[tuple[int, str], str]) -> Key:
    """An audit row's key: ``acted`` are the generations some worker started something
    at, ``held`` (``kip415``) the live member each (round, resource) was revoked from."""
    kind = _KINDS.get(row.get("change") or "", Kind.OTHER)
    departure = ""
    if kind is Kind.LOST:
        departure = str(row.get("departure") or "")
        if held.get((row["ts_ms"], row["resource"]), row["member"]) != row["member"]:
            kind = Kind.NOT_LOST
    cut = Cut.KEPT
    if row.get("cut"):
        persisted, on = bool(row.get("persisted")), row["generation"] in acted
        cut = (Cut.BOTH if on else Cut.PERSISTED) if persisted else (
            Cut.ACTED if on else Cut.IDLE)
    return Key(policy, kind, departure, cut, row.get("protocol") == "eager")


@dataclasses.dataclass(slots=True)
class _Wait:
    """A lost resource's promise: not on another member than ``origin`` before ``until_ms``."""

    origin: str
    since_ms: int
    until_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Row:
    ts: int
    member: str
    resource: str
    what: str
    """How a judged row is named in a problem: ``assigned`` or ``started``."""
    fields: Mapping[str, Any]


@dataclasses.dataclass(slots=True)
class _Ledger:
    """The waits as the rows so far left them, and what was found."""

    delay_ms: int
    waits: dict[str, _Wait] = dataclasses.field(default_factory=dict)
    window: int | None = None
    """kip415: the end of the group's delay window (None: none open)."""
    last_round: int = -1
    """kip415: when the last round that changed assignments was."""
    since: dict[str, int] = dataclasses.field(default_factory=dict)
    """kooper: when each member's current departure was first announced."""
    flagged: set[tuple[str, str, int]] = dataclasses.field(default_factory=set)
    problems: list[str] = dataclasses.field(default_factory=list)
    exercised: int = 0


def _judge(ledger: _Ledger, row: _Row) -> None:
    wait = ledger.waits.get(row.resource)
    if wait is None:
        return
    if row.ts >= wait.until_ms:
        del ledger.waits[row.resource]
        if row.member != wait.origin and row.what == "assigned":
            ledger.exercised += 1
    elif row.member == wait.origin:
        del ledger.waits[row.resource]  # given back to it
    elif (row.resource, wait.origin, wait.since_ms) not in ledger.flagged:
        ledger.flagged.add((row.resource, wait.origin, wait.since_ms))
        ledger.problems.append(
            f"delay: t={row.ts} {row.resource} {row.what} on {row.member}, lost from "
            f"{wait.origin} at {wait.since_ms}, promised to wait until {wait.until_ms}")


def _wait(ledger: _Ledger, row: _Row, until: int) -> None:
    known = ledger.waits.get(row.resource)
    if known is not None and known.origin == row.member:
        return  # the same departure, seen again by a restarted operator: it keeps its end
    if until > row.ts:
        ledger.waits[row.resource] = _Wait(row.member, row.ts, until)


def _wait_window(ledger: _Ledger, row: _Row) -> None:
    window = ledger.window
    if window is not None and row.ts < window:
        until = window
    elif window is not None and ledger.last_round < window:
        until = row.ts  # this round ends the expired window: it hands every lost set out
    else:
        ledger.window = until = row.ts + ledger.delay_ms
    _wait(ledger, row, until)


def _wait_grace(ledger: _Ledger, row: _Row) -> None:
    grace = int(row.fields.get("grace_ms", ledger.delay_ms))
    if not 0 <= grace <= ledger.delay_ms:
        ledger.problems.append(f"delay: t={row.ts} {row.member} departed with a grace of "
                               f"{grace} ms, outside 0..{ledger.delay_ms} ms")
    _wait(ledger, row, ledger.since.setdefault(row.member, row.ts) + grace)


def _hand_over(ledger: _Ledger, row: _Row) -> None:
    ledger.since.pop(row.member, None)
    _release(ledger, row)


def _release(ledger: _Ledger, row: _Row) -> None:
    wait = ledger.waits.get(row.resource)
    if wait is not None and wait.origin == row.member:
        del ledger.waits[row.resource]


def _back(ledger: _Ledger, row: _Row) -> None:
    ledger.since.pop(row.member, None)
    for resource in [r for r, w in ledger.waits.items() if w.origin == row.member]:
        del ledger.waits[resource]


def _end_all(ledger: _Ledger, row: _Row) -> None:
    ledger.waits.clear()
    ledger.window = None


def _round(ledger: _Ledger, row: _Row) -> None:
    ledger.last_round = row.ts
    until = row.fields.get("until_ms")
    if until is not None and until <= row.ts:
        ledger.window = None  # nothing waits any more: the operator reset the delay


_APPLY: Mapping[Effect, Callable[[_Ledger, _Row], None]] = {
    E.NOTHING: lambda ledger, row: None, E.END_ALL: _end_all, E.WAIT_WINDOW: _wait_window,
    E.WAIT_GRACE: _wait_grace, E.HAND_OVER: _hand_over, E.RELEASE: _release,
    E.JUDGE: _judge, E.BACK: _back, E.ROUND: _round,
}


def _walk(audit: Sequence[Mapping[str, Any]], events: Sequence[ev.Event], *,
          policy: model.Policy, delay_ms: int) -> _Ledger:
    """Every row through its rule, the workers' starts interleaved by time."""
    ledger = _Ledger(delay_ms)
    if delay_ms <= 0:
        return ledger  # no delay is promised
    held = {(row["ts_ms"], row["resource"]): row["member"] for row in audit
            if row.get("change") == "revoked"} if policy is KIP415 else {}
    starts = [e for e in events if e.event is ev.Kind.START]
    acted = {e.generation for e in starts}
    starts.sort(key=lambda e: e.ts_ms)
    started = Key(policy, Kind.START, "", Cut.KEPT, eager=False)
    pending = iter(starts)
    upcoming = next(pending, None)

    def apply(key: Key, row: _Row) -> None:
        for effect in rule_for(key).effects:
            _APPLY[effect](ledger, row)

    for fields in audit:
        ts = fields["ts_ms"]
        while upcoming is not None and upcoming.ts_ms <= ts:
            apply(started, _Row(upcoming.ts_ms, upcoming.member, upcoming.resource, "started",
                                {}))
            upcoming = next(pending, None)
        apply(key_of(fields, policy=policy, acted=acted, held=held),
              _Row(ts, fields["member"], fields["resource"], "assigned", fields))
    while upcoming is not None:
        apply(started, _Row(upcoming.ts_ms, upcoming.member, upcoming.resource, "started", {}))
        upcoming = next(pending, None)
    return ledger


def check_delays(audit: Sequence[Mapping[str, Any]], events: Sequence[ev.Event], *,
                 policy: model.Policy, delay_ms: int) -> list[str]:
    """Every scheduled-rebalance delay honoured, judged from the rows and the settings
    (module docstring); ``policy`` and ``delay_ms`` are the run's configuration."""
    return _walk(audit, events, policy=policy, delay_ms=delay_ms).problems


def delays_exercised(audit: Sequence[Mapping[str, Any]], events: Sequence[ev.Event], *,
                     policy: model.Policy, delay_ms: int) -> int:
    """How many lost resources waited (``check_delays``'s promise, > 0) and were then
    assigned to another member once the wait was over: what the check judged."""
    return _walk(audit, events, policy=policy, delay_ms=delay_ms).exercised
