"""JSON wire format of the two protocol documents, one decoder row per version.

``encode_*`` always writes ``CURRENT_VERSION``. ``decode_*`` reads any version
``>= 1``: a known version uses its own row of ``DECODERS``; a *newer* version is
read by the highest row we know, ignoring fields it does not know. That is what
lets a rolling upgrade mix old and new workers: a v1 reader accepts a v2 document
as long as v2 only adds optional fields (the rule in ``docs/protocol.md``).

Resources travel as connector names plus task numbers per connector
(``{"connectors": ["A"], "tasks": {"A": [0, 1]}}``), not as 100,000 task-id
strings: the documents stay small and cheap to build for large groups.

Errors: anything wrong with an incoming document raises ``RemoteProtocolError``
naming the field (``assignment.assigned.tasks['A'][1]: expected a non-negative
integer, got -1``). Encoding a value that cannot be represented (a task id that
is not ``<connector>-<n>``) raises ``LocalProtocolError``: that is our bug.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

from kooper.core import errors, model
from kooper.protocol import messages

CURRENT_VERSION = 1
"""The version every encoder writes."""

_SEPARATORS = (",", ":")


class RawResources(TypedDict):
    """Resources on the wire: connector instances and task numbers per connector."""

    connectors: list[str]
    tasks: dict[str, list[int]]


class RawEpochs(TypedDict):
    """Epochs: per connector instance, and per connector a list aligned with its tasks."""

    connectors: dict[str, int]
    tasks: dict[str, list[int | None]]


class RawAssignment(TypedDict, total=False):
    """``assignment.json`` version 1 (optional keys may be absent)."""

    version: int
    group: str
    member: str
    generation: int
    protocol: str
    policy: str
    assigned: RawResources
    revoked: RawResources
    delayMs: int
    leader: str
    epochs: RawEpochs
    configs: dict[str, dict[str, str]]
    states: dict[str, str]
    incarnation: str


class RawReport(TypedDict, total=False):
    """The ``kooper.dev/report`` annotation, version 1 (optional keys may be absent)."""

    version: int
    member: str
    incarnation: str
    protocols: list[str]
    generation: int
    owned: RawResources
    failed: dict[str, str]
    fenced: bool


# --- encoding -----------------------------------------------------------------


def _leading_zero(joined: str, numbers: list[str]) -> bool:
    # Numbers are sorted shortest first, so a lone "0" can only be the first one.
    zeros = joined.count(",0") + joined.startswith("0")
    return zeros > 1 or (zeros == 1 and numbers[0] != "0")


def _group_tasks(tasks: Iterable[str]) -> dict[str, list[str]]:
    """Task numbers (as digit strings) by connector, each list in numeric order."""
    # Sorting the ids first makes most connectors contiguous, so grouping runs in C
    # (groupby, itemgetter); a connector split by a dashed neighbour is merged below.
    parts = map(str.rpartition, sorted(tasks), itertools.repeat("-"))
    groups: dict[str, list[str]] = {}
    for connector, items in itertools.groupby(parts, key=_FIRST):
        numbers = list(map(_THIRD, items))
        existing = groups.get(connector)
        if existing is None:
            groups[connector] = numbers
        else:
            existing.extend(numbers)
            existing.sort()
    for numbers in groups.values():
        # Lexicographic, then shorter first (a stable sort): numeric order for digit strings.
        numbers.sort(key=len)
    return groups


_FIRST = operator.itemgetter(0)
_THIRD = operator.itemgetter(2)


def _task_numbers(connector: str, numbers: list[str]) -> list[int]:
    joined = ",".join(numbers)
    # One C-speed check for the whole list instead of one per task. Rejects what would
    # not survive a round trip: no dash, an empty connector or number, non-ASCII digits,
    # signs, or a leading zero ("A-01" would come back as "A-1").
    if (
        not connector
        or not joined.isascii()
        or not joined.replace(",", "").isdigit()
        or ",," in joined
        or joined.startswith(",")
        or joined.endswith(",")
        or _leading_zero(joined, numbers)
    ):
        ids = [f"{connector}-{number}" for number in numbers] if connector else numbers
        bad = next((task for task in ids if not _is_task_id(task)), connector)
        raise errors.LocalProtocolError(f"task id {bad!r} is not '<connector>-<n>'")
    return list(map(int, numbers))


def _is_task_id(task: str) -> bool:
    connector, sep, number = task.rpartition("-")
    return bool(
        sep
        and connector
        and number.isascii()
        and number.isdigit()
        and (number[0] != "0" or number == "0")
    )


def _encode_resources(
    resources: model.ConnectorsAndTasks,
) -> tuple[RawResources, dict[str, list[str]]]:
    groups = _group_tasks(resources.tasks)
    tasks = {connector: _task_numbers(connector, numbers) for connector, numbers in groups.items()}
    return {"connectors": sorted(resources.connectors), "tasks": tasks}, groups


def _encode_epochs(
    assigned: model.ConnectorsAndTasks,
    groups: Mapping[str, list[str]],
    epochs: Mapping[str, int],
) -> RawEpochs:
    # Aligned with assigned.tasks[connector]: integers parse far faster than 100,000 keys.
    # Epochs of resources that are not assigned are not sent (they mean nothing to the member).
    connectors = {name: epochs[name] for name in assigned.connectors if name in epochs}
    tasks: dict[str, list[int | None]] = {}
    if epochs:
        for connector, numbers in groups.items():
            values = list(map(epochs.get, map((connector + "-").__add__, numbers)))
            if values.count(None) != len(values):
                tasks[connector] = values
    return {"connectors": connectors, "tasks": tasks}


def _dump(document: Mapping[str, Any]) -> str:
    # ensure_ascii (the default) keeps len(text) equal to its size in bytes.
    return json.dumps(document, separators=_SEPARATORS, sort_keys=True)


def encode_assignment(assignment: messages.Assignment) -> str:
    """The ``assignment.json`` text of ``assignment`` (compact, keys sorted)."""
    overlap = assignment.assigned.intersection(assignment.revoked)
    if overlap:
        raise errors.LocalProtocolError(
            f"assignment for {assignment.member!r} both assigns and revokes {overlap.sorted()}"
        )
    assigned, groups = _encode_resources(assignment.assigned)
    document: RawAssignment = {
        "version": CURRENT_VERSION,
        "group": assignment.group,
        "member": assignment.member,
        "generation": assignment.generation,
        "protocol": str(assignment.protocol),
        "assigned": assigned,
        "revoked": _encode_resources(assignment.revoked)[0],
        "delayMs": assignment.delay_ms,
        "leader": assignment.leader,
        "epochs": _encode_epochs(assignment.assigned, groups, assignment.epochs),
        "configs": {name: dict(config) for name, config in assignment.configs.items()},
        "states": dict(assignment.states),
    }
    if assignment.policy:
        document["policy"] = assignment.policy
    if assignment.incarnation:
        document["incarnation"] = assignment.incarnation
    text = _dump(document)
    if len(text) > messages.MAX_ASSIGNMENT_BYTES:
        raise errors.LocalProtocolError(
            f"assignment for {assignment.member!r} is {len(text)} bytes, "
            f"over the {messages.MAX_ASSIGNMENT_BYTES}-byte ConfigMap budget"
        )
    return text


def encode_report(report: messages.Report) -> str:
    """The ``kooper.dev/report`` annotation text of ``report`` (compact, keys sorted)."""
    document: RawReport = {
        "version": CURRENT_VERSION,
        "member": report.member,
        "incarnation": report.incarnation,
        "protocols": sorted(str(protocol) for protocol in report.protocols),
        "generation": report.generation,
        "owned": _encode_resources(report.owned)[0],
        "failed": dict(report.failed),
        "fenced": report.fenced,
    }
    text = _dump(document)
    if len(text) > messages.MAX_REPORT_BYTES:
        raise errors.LocalProtocolError(
            f"report of {report.member!r} is {len(text)} bytes, "
            f"over MAX_REPORT_BYTES={messages.MAX_REPORT_BYTES}"
        )
    return text


# --- decoding -----------------------------------------------------------------


def _fail(where: str, what: str, value: object) -> errors.RemoteProtocolError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return errors.RemoteProtocolError(f"{where}: expected {what}, got {shown}")


def _is_int(value: object) -> bool:
    # bool is an int subclass; a JSON true is never a generation or a task number.
    return type(value) is int


def _field(document: Mapping[str, Any], where: str, key: str) -> Any:
    try:
        return document[key]
    except KeyError:
        raise errors.RemoteProtocolError(f"{where}: missing required field {key!r}") from None


def _str(value: object, where: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str) or (nonempty and not value):
        raise _fail(where, "a non-empty string" if nonempty else "a string", value)
    return value


def _int(value: object, where: str, *, minimum: int) -> int:
    if not _is_int(value) or value < minimum:  # type: ignore[operator]
        what = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        raise _fail(where, what, value)
    return value  # type: ignore[return-value]


def _object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    return value


def _str_map(value: object, where: str) -> dict[str, str]:
    mapping = _object(value, where)
    for key, item in mapping.items():
        if not isinstance(item, str):
            raise _fail(f"{where}[{key!r}]", "a string", item)
    return dict(mapping)


def _check_numbers(values: object, where: str, *, nullable: bool = False) -> list[Any]:
    """A list of non-negative integers (or nulls): one C-speed pass, a slow pass to explain."""
    what = "a non-negative integer or null" if nullable else "a non-negative integer"
    if not isinstance(values, list):
        raise _fail(where, "a list", values)
    types = set(map(type, values))
    allowed = _INT_OR_NONE if nullable else _INT_ONLY
    if types <= allowed:
        present = [value for value in values if value is not None] if nullable else values
        if not present or min(present) >= 0:
            return values
    for index, value in enumerate(values):
        if not (value is None and nullable) and (not _is_int(value) or value < 0):
            raise _fail(f"{where}[{index}]", what, value)
    raise AssertionError("unreachable: the fast check failed but no element is bad")


_INT_ONLY: frozenset[type] = frozenset({int})
_INT_OR_NONE: frozenset[type] = frozenset({int, type(None)})


def _decode_resources(
    value: object, where: str
) -> tuple[model.ConnectorsAndTasks, dict[str, list[str]]]:
    raw = _object(value, where)
    connectors = raw.get("connectors", [])
    if not isinstance(connectors, list):
        raise _fail(f"{where}.connectors", "a list of connector names", connectors)
    for index, name in enumerate(connectors):
        _str(name, f"{where}.connectors[{index}]", nonempty=True)
    tasks_raw = _object(raw.get("tasks", {}), f"{where}.tasks")
    groups: dict[str, list[str]] = {}
    count = 0
    for connector, numbers in tasks_raw.items():
        if not connector:
            raise _fail(f"{where}.tasks", "non-empty connector names", connector)
        _check_numbers(numbers, f"{where}.tasks[{connector!r}]")
        ids = [f"{connector}-{number}" for number in numbers]
        groups[connector] = ids
        count += len(ids)
    tasks = frozenset(itertools.chain.from_iterable(groups.values()))
    result = model.ConnectorsAndTasks(frozenset(connectors), tasks)
    if len(result.connectors) != len(connectors) or len(tasks) != count:
        raise errors.RemoteProtocolError(f"{where}: duplicate connector or task")
    return result, groups


def _decode_epochs(
    value: object, where: str, groups: Mapping[str, list[str]], connectors: frozenset[str]
) -> dict[str, int]:
    raw = _object(value, where)
    epochs: dict[str, int] = {}
    for name, epoch in _object(raw.get("connectors", {}), f"{where}.connectors").items():
        if name not in connectors:
            raise _fail(f"{where}.connectors", "epochs of assigned connectors only", name)
        epochs[name] = _int(epoch, f"{where}.connectors[{name!r}]", minimum=0)
    for connector, values in _object(raw.get("tasks", {}), f"{where}.tasks").items():
        here = f"{where}.tasks[{connector!r}]"
        _check_numbers(values, here, nullable=True)
        ids = groups.get(connector, ())
        if len(values) != len(ids):
            raise errors.RemoteProtocolError(
                f"{here}: expected {len(ids)} epochs (one per assigned task), got {len(values)}"
            )
        if None in values:
            pairs = zip(ids, values, strict=True)
            epochs.update((task, epoch) for task, epoch in pairs if epoch is not None)
        else:
            epochs.update(zip(ids, values, strict=True))
    return epochs


def _decode_assignment_v1(document: Mapping[str, Any]) -> messages.Assignment:
    where = "assignment"
    protocol = _field(document, where, "protocol")
    try:
        group_protocol = model.Protocol(protocol)
    except ValueError:
        raise _fail(f"{where}.protocol", "'eager' or 'compatible'", protocol) from None
    configs_raw = _object(document.get("configs", {}), f"{where}.configs")
    configs = {
        name: _str_map(config, f"{where}.configs[{name!r}]") for name, config in configs_raw.items()
    }
    assigned, groups = _decode_resources(_field(document, where, "assigned"), f"{where}.assigned")
    revoked = _decode_resources(document.get("revoked", {}), f"{where}.revoked")[0]
    overlap = assigned.intersection(revoked)
    if overlap:
        raise errors.RemoteProtocolError(
            f"{where}: resources both assigned and revoked: {overlap.sorted()[:5]}"
        )
    epochs = _decode_epochs(
        document.get("epochs", {}), f"{where}.epochs", groups, assigned.connectors
    )
    return messages.Assignment(
        group=_str(_field(document, where, "group"), f"{where}.group", nonempty=True),
        member=_str(_field(document, where, "member"), f"{where}.member", nonempty=True),
        generation=_int(_field(document, where, "generation"), f"{where}.generation", minimum=0),
        protocol=group_protocol,
        assigned=assigned,
        revoked=revoked,
        delay_ms=_int(document.get("delayMs", 0), f"{where}.delayMs", minimum=0),
        leader=_str(document.get("leader", ""), f"{where}.leader"),
        epochs=epochs,
        configs=configs,
        states=_str_map(document.get("states", {}), f"{where}.states"),
        policy=_str(document.get("policy", ""), f"{where}.policy"),
        incarnation=_str(document.get("incarnation", ""), f"{where}.incarnation"),
    )


def _decode_report_v1(document: Mapping[str, Any]) -> messages.Report:
    where = "report"
    protocols_raw = _field(document, where, "protocols")
    if not isinstance(protocols_raw, list):
        raise _fail(f"{where}.protocols", "a list of protocol names", protocols_raw)
    known = {str(protocol) for protocol in model.Protocol}
    for index, name in enumerate(protocols_raw):
        _str(name, f"{where}.protocols[{index}]", nonempty=True)
    # A newer worker may advertise protocols we do not know: they are not ours to use.
    protocols = frozenset(model.Protocol(name) for name in protocols_raw if name in known)
    if not protocols:
        raise _fail(f"{where}.protocols", "at least one of 'eager', 'compatible'", protocols_raw)
    fenced = document.get("fenced", False)
    if not isinstance(fenced, bool):
        raise _fail(f"{where}.fenced", "a boolean", fenced)
    return messages.Report(
        member=_str(_field(document, where, "member"), f"{where}.member", nonempty=True),
        incarnation=_str(document.get("incarnation", ""), f"{where}.incarnation"),
        protocols=protocols,
        generation=_int(_field(document, where, "generation"), f"{where}.generation", minimum=-1),
        owned=_decode_resources(document.get("owned", {}), f"{where}.owned")[0],
        failed=_str_map(document.get("failed", {}), f"{where}.failed"),
        fenced=fenced,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class VersionCodec:
    """The decoders of one wire version: one per document."""

    assignment: Callable[[Mapping[str, Any]], messages.Assignment]
    report: Callable[[Mapping[str, Any]], messages.Report]


DECODERS: Mapping[int, VersionCodec] = {
    1: VersionCodec(assignment=_decode_assignment_v1, report=_decode_report_v1),
}
"""Decoders by wire version. Adding version 2 means adding a row here."""


def _load(data: str | bytes, what: str, *, limit: int | None) -> tuple[Mapping[str, Any], int]:
    if isinstance(data, bytes | bytearray):
        if limit is not None and len(data) > limit:
            raise errors.RemoteProtocolError(f"{what} is {len(data)} bytes, over {limit}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.RemoteProtocolError(f"{what}: not UTF-8 ({exc.reason})") from None
    elif isinstance(data, str):
        # Each character is at least one byte: over the limit in characters is over it in bytes.
        if limit is not None and (
            len(data) > limit or (len(data) * 4 > limit and len(data.encode("utf-8")) > limit)
        ):
            raise errors.RemoteProtocolError(f"{what} is over {limit} bytes")
        text = data
    else:
        raise _fail(what, "str or bytes", type(data).__name__)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise errors.RemoteProtocolError(f"{what}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise _fail(what, "a JSON object", document)
    version = _field(document, what, "version")
    _int(version, f"{what}.version", minimum=1)
    return document, version


def _codec_for(version: int) -> VersionCodec:
    return DECODERS.get(version) or DECODERS[max(DECODERS)]


def decode_assignment(data: str | bytes) -> messages.Assignment:
    """Parse ``assignment.json``; raises ``RemoteProtocolError`` naming the bad field."""
    document, version = _load(data, "assignment", limit=None)
    return _codec_for(version).assignment(document)


def decode_report(data: str | bytes) -> messages.Report:
    """Parse a ``kooper.dev/report`` annotation; oversized reports are rejected unread."""
    document, version = _load(data, "report", limit=messages.MAX_REPORT_BYTES)
    return _codec_for(version).report(document)


def known_versions() -> Iterable[int]:
    """The wire versions this build decodes natively."""
    return sorted(DECODERS)
