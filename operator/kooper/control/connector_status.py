"""A Connector's status document, built from where its resources are (pure).

``tasks`` lists each task with its state (``Running``, ``Paused``, ``Unassigned``,
``Failed``), member and epoch; ``worker`` and ``epoch`` are the connector instance's.
The conditions say the first of: the WorkerGroup is missing, the connector is rejected
(``control.containment``), some of it is unassigned, some of it failed; else Ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from kooper.control import views
from kooper.control.status import FAILED, PAUSED, RUNNING, UNASSIGNED, Condition, conditions
from kooper.core import ids, model


def connector_status(
    connector: views.ConnectorView,
    *,
    holders: Mapping[str, ids.WorkerId],
    owned: Mapping[str, ids.WorkerId],
    epochs: Mapping[str, int],
    group_exists: bool,
    restart: Mapping[str, Any] | None = None,
    instances: Mapping[str, ids.WorkerId] | None = None,
    failed: Mapping[str, Mapping[str, Any]] | None = None,
    task_restart: str = "",
    rejected: str = "",
    handing: AbstractSet[str] = frozenset(),
) -> dict[str, Any]:
    """A Connector's ``status`` (without conditions' timestamps settled).

    ``holders`` maps each assigned task to its member; ``owned`` maps each task a
    member reports running to that member; ``instances`` maps each assigned
    connector instance to its member (``holders`` when not given). ``restart`` is the last
    ``kooper.dev/restart`` value acted on (``observed``, ``time``,
    ``rebalanceGeneration``), kept so a restarted operator does not act on it again.
    ``failed`` holds, per resource with a failure record, the fields its entry shows
    (``state: Failed``, ``error``, ``restarts``, ``nextRestart``: ``failures.entry``);
    ``task_restart`` is the last ``kooper.dev/restart-task`` value acted on;
    ``rejected`` why the connector is left unassigned (``control.containment``);
    ``handing`` what is being handed over (``model.Plan.handing_over``): unassigned
    for a moment, which is no problem (``HandingOver``, not ``WorkUnassigned``).
    """
    failed = failed or {}
    tasks, running = _tasks(connector, holders=holders, owned=owned, epochs=epochs,
                            failed=failed)
    instance = (instances if instances is not None else holders).get(connector.name)
    instance_failure = dict(failed.get(connector.name) or {}) if instance is not None else {}
    result: dict[str, Any] = {
        "observedGeneration": connector.generation,
        "worker": instance or "",
        "epoch": epochs.get(connector.name, 0),
        "taskCount": connector.tasks_max,
        "running": running,
        "tasks": tasks,
        "conditions": _conditions(connector, tasks, instance=instance,
                                  instance_failure=instance_failure,
                                  group_exists=group_exists, rejected=rejected,
                                  handing=handing),
    }
    if instance_failure:
        result["instance"] = {"worker": instance, **instance_failure}
    if restart:
        result["restart"] = dict(restart)
    if task_restart:
        result["taskRestart"] = {"observed": task_restart}
    return result


def _tasks(connector: views.ConnectorView, *, holders: Mapping[str, ids.WorkerId],
           owned: Mapping[str, ids.WorkerId], epochs: Mapping[str, int],
           failed: Mapping[str, Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Each task's entry, and how many run where they are assigned."""
    count = 0 if connector.state == "stopped" else connector.tasks_max
    tasks = []
    running = 0
    for number in range(count):
        task = model.task_id(connector.name, number)
        worker = holders.get(task)
        if worker is None:
            state = UNASSIGNED
        elif connector.state == "paused":
            state = PAUSED
        else:
            state = RUNNING
        if worker is not None and owned.get(task) == worker:
            running += 1
        entry: dict[str, Any] = {"id": task, "state": state, "epoch": epochs.get(task, 0)}
        if worker is not None:
            entry["worker"] = worker
            entry.update(failed.get(task) or {})
        tasks.append(entry)
    return tasks, running


def _conditions(connector: views.ConnectorView, tasks: list[dict[str, Any]], *,
                instance: ids.WorkerId | None, instance_failure: Mapping[str, Any],
                group_exists: bool, rejected: str,
                handing: AbstractSet[str]) -> list[Condition]:
    """``Ready`` and ``Degraded``, from the first problem found (module docstring)."""
    moving = [t["id"] for t in tasks if t["state"] == UNASSIGNED]
    if instance is None:
        moving.append(connector.name)
    stranded = [resource for resource in moving if resource not in handing]
    broken = [t["id"] for t in tasks if t["state"] == FAILED]
    if instance_failure.get("state") == FAILED:
        broken.insert(0, connector.name)
    if not group_exists:
        return [
            Condition("Ready", False, "WorkerGroupNotFound",
                      f"WorkerGroup {connector.group!r} does not exist in namespace "
                      f"{connector.namespace!r}"),
            Condition("Degraded", True, "WorkerGroupNotFound",
                      f"spec.workerGroup names {connector.group!r}, which does not exist"),
        ]
    if rejected:
        return [Condition("Ready", False, "Rejected", rejected[:1024]),
                Condition("Degraded", True, "Rejected", rejected[:1024])]
    if stranded:
        what = ("the connector instance" if connector.name in stranded
                else f"{len(stranded)} task(s)")
        return [
            Condition("Ready", False, "WorkUnassigned", f"{what} not assigned to any member"),
            Condition("Degraded", True, "WorkUnassigned", f"{what} not assigned to any member"),
        ]
    if broken:
        errors = {t["id"]: t.get("error", "") for t in tasks if t["state"] == FAILED}
        errors[connector.name] = instance_failure.get("error", "")
        message = (f"{len(broken)} failed: "
                   + "; ".join(f"{r}: {errors[r]}" for r in broken[:3])
                   + (" ..." if len(broken) > 3 else ""))[:1024]
        return [Condition("Ready", False, "Failed", message),
                Condition("Degraded", True, "Failed", message)]
    if moving:
        message = f"{len(moving)} resource(s) moving to another member"
        return [Condition("Ready", False, "HandingOver", message),
                Condition("Degraded", False, "AsExpected", "no problem detected")]
    return [
        Condition("Ready", True, "Assigned", "the instance and every task are assigned"),
        Condition("Degraded", False, "AsExpected", "no problem detected"),
    ]


def restart_record(value: str, *, now_ms: int, generation: int) -> dict[str, Any]:
    """``Connector.status.restart`` once the restart ``value`` asked for was written out."""
    return {"observed": value, "time": views.format_time(now_ms),
            "rebalanceGeneration": generation}


def settle_connector_status(
    status: dict[str, Any], *, previous: Mapping[str, Any], generation: int, now_ms: int
) -> dict[str, Any]:
    """Turn the ``Condition`` values of ``connector_status`` into metav1.Conditions."""
    return {
        **status,
        "conditions": conditions(
            status["conditions"],
            previous=previous.get("conditions") or (),
            generation=generation,
            now=views.format_time(now_ms),
        ),
    }
