"""Replay a scenario through the real controller step with a virtual clock (``kooper replay``).

A scenario is data (``docs/scenarios.md``): the group's settings, its connectors,
the initial workers with what they own, and a list of rounds. Each round applies
its ``before`` events, then runs exactly one ``control.step`` (the operator's and the
simulator's step, so one ``assignor.plan`` call); between rounds every member
applies its assignment (stops what was revoked, starts what was assigned), the way
Kafka's own assignor tests drive the assignor.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from kooper.control import modelled, views
from kooper.control import step as control
from kooper.core import assignor, defaults, errors, ids, model


class ScenarioError(errors.KooperError):
    """A scenario file that cannot be replayed; the message names the field and round."""


@dataclasses.dataclass(frozen=True, slots=True)
class MemberRound:
    """One member's result in one round."""

    assigned: model.ConnectorsAndTasks
    revoked: model.ConnectorsAndTasks
    delay_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class RoundResult:
    """What one ``plan`` call returned, in the scenario's terms."""

    round: int
    now_ms: int
    protocol: model.Protocol
    generation: int
    members: Mapping[str, MemberRound]
    expect: Mapping[str, Any] | None


@dataclasses.dataclass(frozen=True, slots=True)
class Summary:
    """Totals over a replay."""

    rounds: int
    moves: int
    unassigned_ms: int
    """Resource-milliseconds during which a configured resource was assigned to nobody."""


@dataclasses.dataclass(frozen=True, slots=True)
class Replay:
    """A whole replay: every round, then the totals."""

    rounds: Sequence[RoundResult]
    summary: Summary


# -- parsing ---------------------------------------------------------------------------


def _expect_type(value: object, kind: type | tuple[type, ...], where: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ScenarioError(f"{where}: expected {names}, got {type(value).__name__}")
    return value


def _int(value: object, where: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    number = _expect_type(value, int, where)
    if number < minimum:
        raise ScenarioError(f"{where}: must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ScenarioError(f"{where}: must be <= {maximum}, got {number}")
    return int(number)


def _tasks(value: object, where: str) -> int:
    """A connector's task count: 0 to the CRD's ``tasksMax`` maximum."""
    return _int(value, where, maximum=defaults.TASKS_MAX_LIMIT)


def _known(body: Mapping[str, Any], fields: frozenset[str], where: str) -> None:
    """Refuse a field the format does not have: a typo must not be silently ignored."""
    unknown = set(body) - fields
    if unknown:
        raise ScenarioError(f"{where}: unknown field {sorted(unknown)[0]!r}")


def _names(value: object, where: str) -> list[str]:
    items = _expect_type(value, list, where)
    for index, item in enumerate(items):
        _expect_type(item, str, f"{where}[{index}]")
    return list(items)


def parse_resources(value: object, where: str) -> model.ConnectorsAndTasks:
    """``{"connectors": [...], "tasks": [...]}`` (either key may be omitted)."""
    body = _expect_type(value, dict, where)
    _known(body, frozenset({"connectors", "tasks"}), where)
    connectors = _names(body.get("connectors", []), f"{where}.connectors")
    tasks = _names(body.get("tasks", []), f"{where}.tasks")
    for task in tasks:
        if ids.split_task(task) is None:
            raise ScenarioError(f"{where}.tasks: {task!r} is not a task id like 'A-0'")
    return model.ConnectorsAndTasks.of(connectors, tasks)


def _protocols(value: object, where: str) -> frozenset[model.Protocol]:
    return frozenset(_enum(model.Protocol, name, where) for name in _names(value, where))


def _enum(kind: type[enum.StrEnum], value: object, where: str) -> Any:
    text = _expect_type(value, str, where)
    try:
        return kind(text)
    except ValueError:
        raise ScenarioError(
            f"{where}: {text!r} is not one of {', '.join(repr(str(m)) for m in kind)}"
        ) from None


# -- the virtual group ------------------------------------------------------------------


@dataclasses.dataclass
class _Group:
    settings: model.Settings
    connectors: dict[str, int]
    members: dict[ids.WorkerId, model.Member]
    memory: control.Memory
    max_moves_per_round: int | str | None = None
    """``spec.balancing.maxMovesPerRound`` (``None``: unset, the policy's default)."""
    permanent: set[ids.WorkerId] = dataclasses.field(default_factory=set)
    now_ms: int = 0
    incarnations: dict[str, int] = dataclasses.field(default_factory=dict)

    def join(self, worker: str, owned: model.ConnectorsAndTasks,
             protocols: frozenset[model.Protocol]) -> None:
        count = self.incarnations.get(worker, 0) + 1
        self.incarnations[worker] = count
        wid = ids.WorkerId(worker)
        self.permanent.discard(wid)
        self.members[wid] = model.Member(
            id=wid, owned=owned, generation=-1, protocols=protocols, incarnation=str(count)
        )


_EVENT_FIELDS = {  # each event type's fields besides "type" and "note" (docs/scenarios.md)
    "worker_join": ("worker", "owned", "protocols"), "worker_leave": ("worker",),
    "worker_scaled_down": ("worker",), "advance_time": ("ms", "to"), "leader_change": (),
    "connector_add": ("connector", "tasks"), "connector_tasks": ("connector", "tasks"),
    "connector_remove": ("connector",),
}


def _apply_event(group: _Group, event: object, where: str) -> None:
    body = _expect_type(event, dict, where)
    kind = _expect_type(body.get("type"), str, f"{where}.type")
    if kind not in _EVENT_FIELDS:
        raise ScenarioError(f"{where}.type: unknown event type {kind!r}")
    _known(body, frozenset({"type", "note", *_EVENT_FIELDS[kind]}), where)
    default_protocols = frozenset(model.Protocol)
    if kind == "worker_join":
        worker = _expect_type(body.get("worker"), str, f"{where}.worker")
        if ids.WorkerId(worker) in group.members:
            raise ScenarioError(f"{where}: worker {worker!r} is already a member")
        owned = parse_resources(body.get("owned", {}), f"{where}.owned")
        protocols = (
            _protocols(body["protocols"], f"{where}.protocols")
            if "protocols" in body
            else default_protocols
        )
        group.join(worker, owned, protocols)
    elif kind in ("worker_leave", "worker_scaled_down"):
        worker = _expect_type(body.get("worker"), str, f"{where}.worker")
        if ids.WorkerId(worker) not in group.members:
            raise ScenarioError(f"{where}: worker {worker!r} is not a member")
        del group.members[ids.WorkerId(worker)]
        if kind == "worker_scaled_down":
            group.permanent.add(ids.WorkerId(worker))
    elif kind == "advance_time":
        if "to" in body:
            if body["to"] != "deadline" or "ms" in body:
                raise ScenarioError(f"{where}.to: only 'deadline', without ms; got {body['to']!r}")
            delay = group.memory.persisted.state.delay
            if delay is None:
                raise ScenarioError(f"{where}: no delay is pending to advance to")
            group.now_ms = max(group.now_ms, delay.deadline_ms)
        else:
            group.now_ms += _int(body.get("ms"), f"{where}.ms")
    elif kind == "leader_change":
        # The kooper policy persists its state (WorkerGroup status): a new leader
        # continues it. Under kip415 a new leader knows only the pending delay.
        if group.settings.policy is model.Policy.KIP415:
            group.memory = group.memory.replace(state=assignor.forget(group.memory.persisted.state))
    elif kind in ("connector_add", "connector_tasks"):
        name = _expect_type(body.get("connector"), str, f"{where}.connector")
        if kind == "connector_add" and name in group.connectors:
            raise ScenarioError(f"{where}: connector {name!r} already exists")
        if kind == "connector_tasks" and name not in group.connectors:
            raise ScenarioError(f"{where}: connector {name!r} does not exist")
        group.connectors[name] = _tasks(body.get("tasks"), f"{where}.tasks")
    elif kind == "connector_remove":
        name = _expect_type(body.get("connector"), str, f"{where}.connector")
        if group.connectors.pop(name, None) is None:
            raise ScenarioError(f"{where}: connector {name!r} does not exist")


def _settle(group: _Group, plan: model.Plan) -> None:
    """Every member applies its assignment and reports it (between two rounds)."""
    for member, part in plan.members.items():
        current = group.members[member]
        group.members[member] = dataclasses.replace(
            current, owned=part.assigned, generation=part.generation
        )


def _step(group: _Group) -> model.Plan:
    """One controller step over the scenario's group; every round plans."""
    pods, leases = modelled.Members(_NAME).views(group.members)
    inputs = control.Inputs(group=modelled.group(_NAME, group.settings,
                                                 max_moves_per_round=group.max_moves_per_round),
                            pods=pods,
                            leases=leases, connectors=modelled.connectors(_NAME, group.connectors),
                            gone_means_stopped=True)  # Kafka's members stop as they leave
    memory = group.memory.replace(last_key=None)  # a round always plans
    owners = {owner: control.OwnerFacts(exists=ids.WorkerId(owner[1]) not in group.permanent)
              for owner in control.owners_to_read(inputs, memory)}
    decided = control.step(dataclasses.replace(inputs, owners=owners), memory,
                           now_ms=group.now_ms)
    assert decided.plan is not None
    group.memory = decided.memory
    return decided.plan


_NAME = "replay"


def replay(scenario: Mapping[str, Any]) -> Replay:
    """Run a scenario; raise ``ScenarioError`` naming the first bad field."""
    body = _expect_type(scenario, dict, "scenario")
    group = _group(body)
    rounds = _expect_type(body.get("rounds"), list, "rounds")
    if not rounds:
        raise ScenarioError("rounds: a scenario needs at least one round")
    results: list[RoundResult] = []
    last_owner: dict[str, str] = {}
    for resources_member in group.members.values():
        for resource in (*resources_member.owned.connectors, *resources_member.owned.tasks):
            last_owner[resource] = resources_member.id
    moves = 0
    unassigned_ms = 0
    previous_unassigned = 0
    previous_now = 0
    for index, round_spec in enumerate(rounds, start=1):
        where = f"round {index}"
        round_body = _expect_type(round_spec, dict, where)
        _known(round_body, frozenset({"before", "expect", "note"}), where)
        expect = _expectations(round_body.get("expect"), f"{where}.expect")
        for number, event in enumerate(_expect_type(round_body.get("before", []), list,
                                                    f"{where}.before")):
            _apply_event(group, event, f"{where}.before[{number}]")
        unassigned_ms += previous_unassigned * (group.now_ms - previous_now)
        plan = _step(group)
        for member, resources in plan.newly_assigned.items():
            for resource in (*resources.connectors, *resources.tasks):
                if last_owner.get(resource, member) != member:
                    moves += 1
                last_owner[resource] = member
        results.append(RoundResult(
            round=index, now_ms=group.now_ms, protocol=plan.protocol,
            generation=plan.state.generation,
            members={member: MemberRound(part.assigned, part.revoked, plan.delay_ms)
                     for member, part in plan.members.items()},
            expect=expect))
        _settle(group, plan)
        previous_unassigned = len(plan.unassigned)
        previous_now = group.now_ms
    return Replay(results, Summary(len(results), moves, unassigned_ms))


def _expectations(value: object, where: str) -> dict[str, dict[str, Any]] | None:
    """A round's ``expect`` block, checked before the round runs: per member, any of
    ``assigned``, ``revoked`` (parsed) and ``delay_ms``."""
    if value is None:
        return None
    expect: dict[str, dict[str, Any]] = {}
    for member, wanted in _expect_type(value, dict, where).items():
        at = f"{where}.{member}"
        body = _expect_type(wanted, dict, at)
        _known(body, frozenset({"assigned", "revoked", "delay_ms"}), at)
        expect[member] = {field: _int(given, f"{at}.{field}") if field == "delay_ms"
                          else parse_resources(given, f"{at}.{field}")
                          for field, given in body.items()}
    return expect


def _group(body: Mapping[str, Any]) -> _Group:
    """The scenario's group before its first round: settings, connectors, workers."""
    known = {"policy", "protocol", "max_delay_ms", "max_moves_per_round", "connectors",
             "workers", "rounds", "name", "description"}
    if set(body) - known:
        raise ScenarioError(f"unknown top-level field {sorted(set(body) - known)[0]!r}")
    settings = model.Settings(
        protocol=_enum(model.Protocol, body.get("protocol", defaults.PROTOCOL), "protocol"),
        policy=_enum(model.Policy, body.get("policy", defaults.POLICY), "policy"),
        max_delay_ms=_int(body.get("max_delay_ms", defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS),
                          "max_delay_ms"),
    )
    connectors = {
        _expect_type(name, str, "connectors"): _tasks(count, f"connectors.{name}")
        for name, count in _expect_type(body.get("connectors", {}), dict, "connectors").items()
    }
    max_moves = None
    if "max_moves_per_round" in body:
        max_moves = views.parse_max_moves(body["max_moves_per_round"])
        if max_moves is None:
            raise ScenarioError("max_moves_per_round: a count of at least 1 or a percentage "
                                f"from 1% to 100%, got {body['max_moves_per_round']!r}")
    group = _Group(settings, connectors, {},
                   control.Memory.of(state=model.PlanState(forgotten=True)),
                   max_moves_per_round=max_moves)
    for worker, spec in _expect_type(body.get("workers", {}), dict, "workers").items():
        spec_body = _expect_type(spec, dict, f"workers.{worker}")
        protocols = (
            _protocols(spec_body.pop("protocols"), f"workers.{worker}.protocols")
            if "protocols" in spec_body
            else frozenset(model.Protocol)
        )
        group.join(worker, parse_resources(spec_body, f"workers.{worker}"), protocols)
    return group


# -- checking and printing ------------------------------------------------------------------


def check(result: Replay) -> list[str]:
    """Every difference between the rounds and their ``expect`` blocks, as sentences."""
    problems: list[str] = []
    for round_result in result.rounds:
        if not round_result.expect:
            continue
        for member, wanted in round_result.expect.items():
            where = f"round {round_result.round}: {member}"
            got = round_result.members.get(member)
            if got is None:
                problems.append(f"{where}: expected a member, but it is not in the group")
                continue
            for field in ("assigned", "revoked"):
                if field in wanted:
                    expected = wanted[field]
                    actual = got.assigned if field == "assigned" else got.revoked
                    if expected != actual:
                        problems.append(
                            f"{where} {field}: expected {expected.sorted()}, got {actual.sorted()}"
                        )
            if "delay_ms" in wanted and wanted["delay_ms"] != got.delay_ms:
                problems.append(
                    f"{where} delay_ms: expected {wanted['delay_ms']}, got {got.delay_ms}"
                )
    return problems


def _resources_json(resources: model.ConnectorsAndTasks) -> dict[str, list[str]]:
    return {
        "connectors": sorted(resources.connectors, key=model.resource_sort_key),
        "tasks": sorted(resources.tasks, key=model.resource_sort_key),
    }


def to_json(result: Replay) -> dict[str, Any]:
    """The ``--format json`` document."""
    return {
        "rounds": [
            {
                "round": r.round,
                "now_ms": r.now_ms,
                "protocol": str(r.protocol),
                "generation": r.generation,
                "members": {
                    member: {
                        "assigned": _resources_json(part.assigned),
                        "revoked": _resources_json(part.revoked),
                        "delay_ms": part.delay_ms,
                    }
                    for member, part in sorted(r.members.items())
                },
            }
            for r in result.rounds
        ],
        "summary": dataclasses.asdict(result.summary),
    }
