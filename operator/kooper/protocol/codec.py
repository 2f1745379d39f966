"""JSON wire format of the two protocol documents, one decoder row per version.

``encode_*`` always writes ``CURRENT_VERSION``. ``decode_*`` reads any version
``>= 1``: a known version uses its own row of ``DECODERS``; a *newer* version is
read by the highest row we know, ignoring fields it does not know. That is what
lets a rolling upgrade mix old and new workers: a v1 reader accepts a v2 document
as long as v2 only adds optional fields (the rule in ``docs/protocol.md``).

Resources travel as connector names plus task numbers per connector
(``{"connectors": ["A"], "tasks": {"A": [0, 1]}}``), not as 100,000 task-id
strings: the documents stay small and cheap to build for large groups.

Large reports are compact (report version 2): when the plain text would not fit
``MAX_REPORT_BYTES``, each connector's task numbers become one string, a list of
ranges (``"0-99999"``) or a bitmap (``"~CQI"``), whichever is shorter. A v1 reader
rejects that string instead of misreading it, so an old operator keeps the last
report it could read rather than believing the member owns nothing.

Errors: anything wrong with an incoming document raises ``RemoteProtocolError``
naming the field (``assignment.assigned.tasks['A'][1]: expected a non-negative
integer, got -1``). Encoding a value that cannot be represented (a task id that
is not ``<connector>-<n>``) raises ``LocalProtocolError``: that is our bug.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

from kooper.core import errors, model
from kooper.core.ids import split_task
from kooper.protocol import messages

CURRENT_VERSION = 2
"""The highest version the encoders write. Assignments are version 1; a report is
version 1 when its plain text fits ``MAX_REPORT_BYTES``, else version 2 (compact)."""

ASSIGNMENT_VERSION = 1
"""The version of every assignment written."""

COMPACT_REPORT_VERSION = 2
"""The version of a report whose task numbers are compact strings."""

MAX_DECODED_TASKS = 1_000_000
"""A document naming more tasks than this is refused: a few bytes of ranges
(``"0-999999999"``) must not make the reader build a billion task ids."""

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
    memberEpoch: int
    rejoins: int


class RawFailureCounts(TypedDict):
    """Failure counts: per connector instance, and per connector its task sets by count."""

    connectors: dict[str, int]
    tasks: dict[str, dict[str, str]]


class RawReport(TypedDict, total=False):
    """The ``kooper.dev/report`` annotation, versions 1 and 2 (optional keys may be absent).

    In version 2 ``owned.tasks[connector]`` may be a compact task-number string."""

    version: int
    member: str
    incarnation: str
    protocols: list[str]
    generation: int
    owned: RawResources
    failed: dict[str, str]
    fenced: bool
    failureCounts: RawFailureCounts
    memberEpoch: int
    rejoins: int
    left: bool


# --- encoding -----------------------------------------------------------------
#
# The encoders write the JSON text piece by piece instead of building a document for
# json.dumps: task numbers are digit strings already (they are cut out of the task ids),
# so writing them costs one join instead of int() and back. The text is exactly what
# json.dumps(document, separators=(",", ":"), sort_keys=True) writes (ASCII only, keys
# sorted at every level); tests/protocol compares the two on random messages. Only plain
# strings, ints and validated task numbers are written here: anything else (configs,
# epoch lists with their nulls, an int subclass) goes through the json encoder itself.

_ENCODER = json.JSONEncoder(separators=_SEPARATORS, sort_keys=True)
_escape: Callable[[str], str] = json.encoder.encode_basestring_ascii
"""json's own C string writer (with its quotes), as ``json.dumps`` uses it for ASCII output."""


def _json(value: object) -> str:
    """Any small value (configs, states, booleans), written by the json encoder."""
    return _ENCODER.encode(value)


def _string(value: str) -> str:
    return _escape(value) if type(value) is str else _json(value)


def _integer(value: int) -> str:
    # bool is an int subclass that json writes as true/false: only exact ints take the short cut.
    return str(value) if type(value) is int else _json(value)


def _object_text(fields: Mapping[str, str]) -> str:
    """A JSON object from already-written values, keys sorted as ``sort_keys`` sorts them."""
    return "{" + ",".join([_escape(key) + ":" + fields[key] for key in sorted(fields)]) + "}"


def _canonical(joined: str) -> bool:
    """Whether ``joined`` is canonical decimal task numbers in numeric order, comma-separated."""
    # One C-speed check for the whole list instead of one per task. Rejects what would
    # not survive a round trip: an empty number, non-ASCII digits, signs, a dash, or a
    # leading zero ("A-01" would come back as "A-1"). In numeric order, a lone "0" can
    # only be the first number.
    zeros = joined.count(",0") + joined.startswith("0")
    return (
        joined.isascii()
        and joined.replace(",", "").isdigit()
        and ",," not in joined
        and not joined.startswith(",")
        and not joined.endswith(",")
        and (zeros == 0 or (zeros == 1 and (joined == "0" or joined.startswith("0,"))))
    )


def _check_task_numbers(connector: str, ids: list[str], numbers: list[str]) -> str:
    """The task numbers of one connector joined by commas, once they are known to be canonical."""
    joined = ",".join(numbers)
    if not connector or not _canonical(joined):
        bad = next((task for task in ids if not _is_task_id(task)), ids[0])
        raise errors.LocalProtocolError(f"task id {bad!r} is not '<connector>-<n>'")
    return joined


def _is_task_id(task: str) -> bool:
    """A task id in its canonical wire form: ``core.ids.split_task``'s shape, no leading zeros."""
    number = task.rpartition("-")[2]
    return split_task(task) is not None and (number[0] != "0" or number == "0")


@dataclasses.dataclass(slots=True)
class _TaskGroup:
    """One connector's tasks, in numeric order: the ids, and their numbers joined by commas."""

    ids: list[str]
    numbers: str


def _group_tasks(tasks: Iterable[str]) -> dict[str, _TaskGroup]:
    """Tasks by connector, each group in numeric order of task number (validated)."""
    # Within one connector every id starts with the same "<connector>-", so ordering ids by
    # length, then lexicographically, puts its numbers in numeric order (two C sorts, and
    # the ids keep their cached hashes for the epoch look-ups). Leading zeros, which would
    # break that, are rejected.
    ids = sorted(tasks)
    if not ids:
        return {}
    ids.sort(key=len)
    group = _single_group(ids)
    if group is not None:
        return group
    parts = map(str.rpartition, ids, itertools.repeat("-"))
    by_connector: dict[str, tuple[list[str], list[str]]] = {}
    for task, (connector, _, number) in zip(ids, parts, strict=True):
        group_ids, numbers = by_connector.setdefault(connector, ([], []))
        group_ids.append(task)
        numbers.append(number)
    return {
        connector: _TaskGroup(group_ids, _check_task_numbers(connector, group_ids, numbers))
        for connector, (group_ids, numbers) in by_connector.items()
    }


def _single_group(ids: list[str]) -> dict[str, _TaskGroup] | None:
    """The one group of ``ids`` if they are all valid tasks of one connector, else None."""
    # The usual case, in a few C string passes instead of a split per id: take the first
    # id's "<connector>-" out of the joined ids, check that the rest is canonical numbers,
    # and that putting the prefix back before each number gives the joined ids again. With
    # no comma inside any id, equal texts mean equal ids, one by one.
    connector = ids[0].rpartition("-")[0]
    prefix = connector + "-"
    joined_ids = ",".join(ids)
    if not connector or joined_ids.count(",") != len(ids) - 1:
        return None
    joined = joined_ids[len(prefix) :].replace("," + prefix, ",")
    if not _canonical(joined) or prefix + joined.replace(",", "," + prefix) != joined_ids:
        return None
    return {connector: _TaskGroup(ids, joined)}


def _resources_text(connectors: frozenset[str], groups: Mapping[str, _TaskGroup]) -> str:
    tasks = {connector: "[" + group.numbers + "]" for connector, group in groups.items()}
    return _object_text(
        {
            "connectors": "[" + ",".join(map(_string, sorted(connectors))) + "]",
            "tasks": _object_text(tasks),
        }
    )


def _ranges_text(numbers: list[int]) -> str:
    """Sorted distinct task numbers as ranges: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    parts: list[str] = []
    start = previous = numbers[0]
    for number in itertools.islice(numbers, 1, None):
        if number != previous + 1:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = number
        previous = number
    parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)


def _bitmap_text(numbers: list[int]) -> str:
    """Sorted distinct task numbers as ``~`` + unpadded base64 of a bitmap (bit n: task n)."""
    bits = bytearray(numbers[-1] // 8 + 1)
    for number in numbers:
        bits[number >> 3] |= 1 << (number & 7)
    return "~" + base64.b64encode(bytes(bits)).decode("ascii").rstrip("=")


def _set_text(numbers: list[int]) -> str:
    """The shorter compact form of sorted distinct task numbers (ranges or bitmap)."""
    ranges = _ranges_text(numbers)
    # A bitmap costs about (largest number) / 6 characters: only build it when it can win.
    if numbers[-1] // 6 < len(ranges):
        bitmap = _bitmap_text(numbers)
        if len(bitmap) < len(ranges):
            return bitmap
    return ranges


def _compact_resources_text(connectors: frozenset[str], groups: Mapping[str, _TaskGroup]) -> str:
    tasks = {
        connector: _string(_set_text(list(map(int, group.numbers.split(",")))))
        for connector, group in groups.items()
    }
    return _object_text(
        {
            "connectors": "[" + ",".join(map(_string, sorted(connectors))) + "]",
            "tasks": _object_text(tasks),
        }
    )


def _failure_counts_text(counts: Mapping[str, int]) -> str:
    connectors: dict[str, int] = {}
    tasks: dict[str, dict[int, list[int]]] = {}
    for resource, count in counts.items():
        if type(count) is not int or count < 1:
            raise errors.LocalProtocolError(f"failure count of {resource!r} is {count!r}")
        if _is_task_id(resource):
            connector, _, number = resource.rpartition("-")
            tasks.setdefault(connector, {}).setdefault(count, []).append(int(number))
        else:
            connectors[resource] = count
    task_text = {
        connector: _object_text(
            {str(count): _string(_set_text(sorted(numbers))) for count, numbers in by_count.items()}
        )
        for connector, by_count in tasks.items()
    }
    return _object_text({"connectors": _json(connectors), "tasks": _object_text(task_text)})


def _epochs_text(
    assigned: model.ConnectorsAndTasks,
    groups: Mapping[str, _TaskGroup],
    epochs: Mapping[str, int],
) -> str:
    # Aligned with assigned.tasks[connector]: integers parse far faster than 100,000 keys.
    # Epochs of resources that are not assigned are not sent (they mean nothing to the member).
    connectors = {name: epochs[name] for name in assigned.connectors if name in epochs}
    tasks: dict[str, str] = {}
    if epochs:
        for connector, group in groups.items():
            values = list(map(epochs.get, group.ids))
            if values.count(None) != len(values):
                tasks[connector] = _json(values)  # nulls: tasks without an epoch
    return _object_text({"connectors": _json(connectors), "tasks": _object_text(tasks)})


def encode_assignment(assignment: messages.Assignment) -> str:
    """The ``assignment.json`` text of ``assignment`` (compact, keys sorted)."""
    if assignment.revoked and (overlap := assignment.assigned.intersection(assignment.revoked)):
        raise errors.LocalProtocolError(
            f"assignment for {assignment.member!r} both assigns and revokes {overlap.sorted()}"
        )
    assigned = assignment.assigned
    groups = _group_tasks(assigned.tasks)
    revoked = assignment.revoked
    fields = {
        "version": _integer(ASSIGNMENT_VERSION),
        "group": _string(assignment.group),
        "member": _string(assignment.member),
        "generation": _integer(assignment.generation),
        "protocol": _string(str(assignment.protocol)),
        "assigned": _resources_text(assigned.connectors, groups),
        "revoked": _resources_text(revoked.connectors, _group_tasks(revoked.tasks)),
        "delayMs": _integer(assignment.delay_ms),
        "leader": _string(assignment.leader),
        "epochs": _epochs_text(assigned, groups, assignment.epochs),
        "configs": _json({name: dict(config) for name, config in assignment.configs.items()}),
        "states": _json(dict(assignment.states)),
    }
    if assignment.policy:
        fields["policy"] = _string(assignment.policy)
    if assignment.incarnation:
        fields["incarnation"] = _string(assignment.incarnation)
    if assignment.member_epoch:
        fields["memberEpoch"] = _integer(assignment.member_epoch)
    if assignment.rejoins:
        fields["rejoins"] = _integer(assignment.rejoins)
    if assignment.leader_epoch:
        fields["leaderEpoch"] = _integer(assignment.leader_epoch)
    return _within(
        _object_text(fields),
        messages.MAX_ASSIGNMENT_BYTES,
        f"assignment for {assignment.member!r}",
        f"the {messages.MAX_ASSIGNMENT_BYTES}-byte ConfigMap budget",
    )


def encode_report(report: messages.Report) -> str:
    """The ``kooper.dev/report`` annotation text of ``report`` (compact, keys sorted).

    Version 1 when that fits ``MAX_REPORT_BYTES`` (every reader reads it), else the
    compact version 2; ``LocalProtocolError`` if even that does not fit.
    """
    owned = report.owned
    groups = _group_tasks(owned.tasks)
    fields = {
        "version": _integer(1),
        "member": _string(report.member),
        "incarnation": _string(report.incarnation),
        "protocols": _json(sorted(str(protocol) for protocol in report.protocols)),
        "generation": _integer(report.generation),
        "owned": _resources_text(owned.connectors, groups),
        "failed": _json(dict(report.failed)),
        "fenced": _json(report.fenced),
    }
    if report.failure_counts:
        fields["failureCounts"] = _failure_counts_text(report.failure_counts)
    if report.member_epoch:
        fields["memberEpoch"] = _integer(report.member_epoch)
    if report.rejoins:
        fields["rejoins"] = _integer(report.rejoins)
    if report.left:
        fields["left"] = _json(True)
    text = _object_text(fields)
    if len(text) <= messages.MAX_REPORT_BYTES:
        return text
    fields["version"] = _integer(COMPACT_REPORT_VERSION)
    fields["owned"] = _compact_resources_text(owned.connectors, groups)
    return _within(
        _object_text(fields),
        messages.MAX_REPORT_BYTES,
        f"report of {report.member!r}",
        f"MAX_REPORT_BYTES={messages.MAX_REPORT_BYTES} even in the compact form",
    )


def _within(text: str, limit: int, what: str, budget: str) -> str:
    # ASCII only (non-ASCII is escaped), so len(text) is its size in bytes.
    if len(text) > limit:
        raise errors.LocalProtocolError(f"{what} is {len(text)} bytes, over {budget}")
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


def _check_numbers(values: object, where: str, key: str, *, nullable: bool = False) -> bool:
    """Check that ``where[key]`` is a list of non-negative integers (or nulls).

    Returns whether it holds nulls. One C-speed pass over the list; only a bad list
    gets the slow pass that names the element (and only then is the field's name
    written out).
    """
    if type(values) is list:
        types = set(map(type, values))
        if types <= _INT_ONLY:
            if not values or min(values) >= 0:
                return False
        # filter(None, ...) drops the nulls (and zeros, which are fine anyway).
        elif nullable and types <= _INT_OR_NONE and min(filter(None, values), default=0) >= 0:
            return True
    here = f"{where}[{key!r}]"
    if not isinstance(values, list):
        raise _fail(here, "a list", values)
    what = "a non-negative integer or null" if nullable else "a non-negative integer"
    for index, value in enumerate(values):
        if not (value is None and nullable) and (not _is_int(value) or value < 0):
            raise _fail(f"{here}[{index}]", what, value)
    raise AssertionError("unreachable: the fast check failed but no element is bad")


_INT_ONLY: frozenset[type] = frozenset({int})
_INT_OR_NONE: frozenset[type] = frozenset({int, type(None)})
_STR_ONLY: frozenset[type] = frozenset({str})


def _decode_set(text: str, where: str) -> list[int]:
    """A compact task-number string (ranges or ``~`` bitmap) as sorted distinct numbers."""
    if text.startswith("~"):
        payload = text[1:]
        try:
            bits = base64.b64decode(payload + "=" * (-len(payload) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise _fail(where, "a base64 bitmap after '~'", text) from None
        if len(bits) * 8 > MAX_DECODED_TASKS:
            raise _fail(where, f"at most {MAX_DECODED_TASKS} tasks", text)
        numbers = [
            index * 8 + bit
            for index, byte in enumerate(bits)
            if byte
            for bit in range(8)
            if byte >> bit & 1
        ]
        if not numbers:
            raise _fail(where, "a bitmap with at least one task", text)
        return numbers
    numbers = []
    previous = -1
    for part in text.split(","):
        first, dash, last = part.partition("-")
        if not (_is_number(first) and (not dash or _is_number(last))):
            raise _fail(where, "ranges of task numbers such as '0-9,12'", text)
        start, end = int(first), int(last) if dash else int(first)
        if start <= previous or end < start or (dash and end == start):
            raise _fail(where, "ascending, disjoint ranges such as '0-9,12'", text)
        if len(numbers) + end - start >= MAX_DECODED_TASKS:
            raise _fail(where, f"at most {MAX_DECODED_TASKS} tasks", text)
        numbers.extend(range(start, end + 1))
        previous = end
    return numbers


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit() and (text[0] != "0" or text == "0")


def _decode_resources(
    value: object, where: str, *, compact: bool = False
) -> tuple[model.ConnectorsAndTasks, dict[str, list[str]]]:
    raw = _object(value, where)
    connectors = raw.get("connectors", [])
    if type(connectors) is not list:
        raise _fail(f"{where}.connectors", "a list of connector names", connectors)
    if not set(map(type, connectors)) <= _STR_ONLY or "" in connectors:
        for index, name in enumerate(connectors):
            _str(name, f"{where}.connectors[{index}]", nonempty=True)
    tasks_raw = raw.get("tasks", _EMPTY)
    if type(tasks_raw) is not dict:
        raise _fail(f"{where}.tasks", "an object", tasks_raw)
    groups: dict[str, list[str]] = {}
    count = 0
    for connector, raw_numbers in tasks_raw.items():
        if not connector:
            raise _fail(f"{where}.tasks", "non-empty connector names", connector)
        if compact and type(raw_numbers) is str:
            numbers = _decode_set(raw_numbers, f"{where}.tasks[{connector!r}]")
        else:
            _check_numbers(raw_numbers, f"{where}.tasks", connector)
            numbers = raw_numbers
        ids = [f"{connector}-{number}" for number in numbers]
        if count + len(ids) > MAX_DECODED_TASKS:
            raise _fail(where, f"at most {MAX_DECODED_TASKS} tasks", f"{count + len(ids)} tasks")
        groups[connector] = ids
        count += len(ids)
    if not connectors and not groups:
        return model.EMPTY, groups  # shared: an empty set is the usual "revoked"
    if len(groups) == 1:
        tasks = frozenset(ids)
    else:
        tasks = frozenset(itertools.chain.from_iterable(groups.values()))
    result = model.ConnectorsAndTasks(frozenset(connectors), tasks)
    if len(result.connectors) != len(connectors) or len(tasks) != count:
        raise errors.RemoteProtocolError(f"{where}: duplicate connector or task")
    return result, groups


_EMPTY: Mapping[str, Any] = {}


def _decode_epochs(
    value: object, where: str, groups: Mapping[str, list[str]], connectors: frozenset[str]
) -> dict[str, int]:
    raw = _object(value, where)
    epochs: dict[str, int] = {}
    for name, epoch in _object(raw.get("connectors", _EMPTY), f"{where}.connectors").items():
        if name not in connectors:
            raise _fail(f"{where}.connectors", "epochs of assigned connectors only", name)
        epochs[name] = _int(epoch, f"{where}.connectors[{name!r}]", minimum=0)
    tasks_raw = raw.get("tasks", _EMPTY)
    if type(tasks_raw) is not dict:
        raise _fail(f"{where}.tasks", "an object", tasks_raw)
    for connector, values in tasks_raw.items():
        nulls = _check_numbers(values, f"{where}.tasks", connector, nullable=True)
        ids = groups.get(connector, ())
        if len(values) != len(ids):
            raise errors.RemoteProtocolError(
                f"{where}.tasks[{connector!r}]: expected {len(ids)} epochs "
                f"(one per assigned task), got {len(values)}"
            )
        if nulls:
            pairs = zip(ids, values, strict=True)
            epochs.update((task, epoch) for task, epoch in pairs if epoch is not None)
        else:
            epochs.update(zip(ids, values, strict=True))
    return epochs


_PROTOCOLS: Mapping[str, model.Protocol] = {str(protocol): protocol for protocol in model.Protocol}


def _decode_assignment_v1(document: Mapping[str, Any]) -> messages.Assignment:
    where = "assignment"
    protocol = _field(document, where, "protocol")
    group_protocol = _PROTOCOLS.get(protocol) if type(protocol) is str else None
    if group_protocol is None:
        raise _fail(f"{where}.protocol", "'eager' or 'compatible'", protocol)
    configs_raw = _object(document.get("configs", {}), f"{where}.configs")
    configs = {
        name: _str_map(config, f"{where}.configs[{name!r}]") for name, config in configs_raw.items()
    }
    assigned, groups = _decode_resources(_field(document, where, "assigned"), f"{where}.assigned")
    revoked = _decode_resources(document.get("revoked", {}), f"{where}.revoked")[0]
    if revoked and (overlap := assigned.intersection(revoked)):
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
        member_epoch=_int(document.get("memberEpoch", 0), f"{where}.memberEpoch", minimum=0),
        rejoins=_int(document.get("rejoins", 0), f"{where}.rejoins", minimum=0),
        leader_epoch=_int(document.get("leaderEpoch", 0), f"{where}.leaderEpoch", minimum=0),
    )


def _decode_failure_counts(value: object, where: str) -> dict[str, int]:
    raw = _object(value, where)
    counts: dict[str, int] = {}
    for name, count in _object(raw.get("connectors", _EMPTY), f"{where}.connectors").items():
        _str(name, f"{where}.connectors", nonempty=True)
        counts[name] = _int(count, f"{where}.connectors[{name!r}]", minimum=1)
    for connector, by_count in _object(raw.get("tasks", _EMPTY), f"{where}.tasks").items():
        here = f"{where}.tasks[{connector!r}]"
        if not connector:
            raise _fail(f"{where}.tasks", "non-empty connector names", connector)
        for count_text, numbers in _object(by_count, here).items():
            if not _is_number(count_text) or count_text == "0":
                raise _fail(here, "failure counts >= 1 as keys", count_text)
            count = int(count_text)
            for number in _decode_set(_str(numbers, f"{here}[{count_text!r}]"), here):
                task = f"{connector}-{number}"
                if task in counts:
                    raise errors.RemoteProtocolError(f"{where}: {task!r} counted twice")
                counts[task] = count
        if len(counts) > MAX_DECODED_TASKS:
            raise _fail(where, f"at most {MAX_DECODED_TASKS} resources", len(counts))
    return counts


def _decode_report(document: Mapping[str, Any], *, compact: bool) -> messages.Report:
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
    left = document.get("left", False)
    if not isinstance(left, bool):
        raise _fail(f"{where}.left", "a boolean", left)
    return messages.Report(
        member=_str(_field(document, where, "member"), f"{where}.member", nonempty=True),
        incarnation=_str(document.get("incarnation", ""), f"{where}.incarnation"),
        protocols=protocols,
        generation=_int(_field(document, where, "generation"), f"{where}.generation", minimum=-1),
        owned=_decode_resources(document.get("owned", {}), f"{where}.owned", compact=compact)[0],
        failed=_str_map(document.get("failed", {}), f"{where}.failed"),
        fenced=fenced,
        failure_counts=_decode_failure_counts(
            document.get("failureCounts", _EMPTY), f"{where}.failureCounts"
        ),
        member_epoch=_int(document.get("memberEpoch", 0), f"{where}.memberEpoch", minimum=0),
        rejoins=_int(document.get("rejoins", 0), f"{where}.rejoins", minimum=0),
        left=left,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class VersionCodec:
    """The decoders of one wire version: one per document."""

    assignment: Callable[[Mapping[str, Any]], messages.Assignment]
    report: Callable[[Mapping[str, Any]], messages.Report]


DECODERS: Mapping[int, VersionCodec] = {
    1: VersionCodec(
        assignment=_decode_assignment_v1,
        report=functools.partial(_decode_report, compact=False),
    ),
    # Version 2: a report's task numbers may be compact strings. Assignments did not change.
    2: VersionCodec(
        assignment=_decode_assignment_v1,
        report=functools.partial(_decode_report, compact=True),
    ),
}
"""Decoders by wire version. A new version means a new row here."""


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


def encode_resources(resources: model.ConnectorsAndTasks) -> dict[str, Any]:
    """A resource set as the JSON value the documents carry.

    ``{"connectors": ["A"], "tasks": {"A": [0, 1]}}``: the shape of ``assigned`` in
    ``assignment.json``, reused wherever else kooper stores resource sets (the lost
    sets in ``WorkerGroup.status.state``), so that one codec owns it.
    """
    return dict(json.loads(_resources_text(resources.connectors, _group_tasks(resources.tasks))))


def decode_resources(value: object, where: str = "resources") -> model.ConnectorsAndTasks:
    """The inverse of ``encode_resources``; raises ``RemoteProtocolError`` naming the field."""
    return _decode_resources(value, where)[0]
