"""Table output: what ``kubectl get`` asks for (``Accept: application/json;as=Table;...``).

kubectl prints whatever columns the server's ``meta.k8s.io/v1`` Table names: a
CRD's ``additionalPrinterColumns``, or the built-in kinds' columns the real API
server defines (pods' READY/STATUS/RESTARTS, ConfigMaps' DATA...). Without a
Table it falls back to NAME and AGE only. Pure functions of the objects and
``now`` (seconds since the epoch), so tests need no clock.

JSONPath covers what printer columns use: ``.a.b``, ``.a[0]`` and
``.a[?(@.type=="Ready")].status``.
"""

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kooper.emulator import resources

Obj = Mapping[str, Any]
Cell = Callable[[Obj, float], object]

TABLE_MEDIA = "as=Table"
"""The marker in an ``Accept`` header that asks for a Table."""

_NAME_COLUMN = {"name": "Name", "type": "string", "format": "name", "priority": 0,
                "description": "Name must be unique within a namespace."}
_SEGMENT = re.compile(r'\.?([^.\[\]]+)|\[(\d+)\]|\[\?\(@\.([\w.]+)==["\']([^"\']*)["\']\)\]')


def wants_table(accept: str) -> bool:
    """Whether an ``Accept`` header asks for a Table (kubectl's human-readable ``get``)."""
    return TABLE_MEDIA in accept.replace(" ", "")


def jsonpath(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (None when missing)."""
    value = obj
    for key, index, field, wanted in _SEGMENT.findall(path.strip().strip("{}")):
        if key:
            value = value.get(key) if isinstance(value, Mapping) else None
        elif index:
            value = value[int(index)] if isinstance(value, list) and int(index) < len(
                value) else None
        else:
            matches = [item for item in value or () if isinstance(item, Mapping)
                       and str(jsonpath(item, "." + field)) == wanted] if isinstance(
                value, list) else []
            value = matches[0] if matches else None
        if value is None:
            return None
    return value


def human_duration(seconds: float) -> str:
    """Kubernetes' ``duration.HumanDuration``: 45s, 3m20s, 15m, 5h10m, 3d4h, 400d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    days = hours // 24
    if hours < 24 * 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def age(timestamp: object, now: float) -> str:
    """A timestamp as an age (``<unknown>`` when absent, ``<invalid>`` when unparsable)."""
    if not isinstance(timestamp, str) or not timestamp:
        return "<unknown>"
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    return human_duration(now - then.timestamp())


def _typed(kind: str, value: Any, now: float) -> object:
    """A printer column's cell, converted as the API server's CRD table convertor does."""
    if value is None:
        return None
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "date":
        return age(value, now)
    if kind == "string":
        return value if isinstance(value, str) else _jsonish(value)
    return None


def _jsonish(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


# -- the built-in kinds' columns (as the real API server prints them) ------------------------

def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _created(obj: Obj, now: float) -> object:
    return age(_meta(obj).get("creationTimestamp"), now)


def _pod_ready(obj: Obj, _now: float) -> object:
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    containers = (obj.get("spec") or {}).get("containers") or []
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(containers)}"


def _pod_status(obj: Obj, _now: float) -> object:
    if _meta(obj).get("deletionTimestamp"):
        return "Terminating"
    status = obj.get("status") or {}
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        reason = (state.get("waiting") or state.get("terminated") or {}).get("reason")
        if reason:
            return str(reason)
    return str(status.get("reason") or status.get("phase") or "Pending")


def _pod_restarts(obj: Obj, _now: float) -> object:
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount", 0)) for s in statuses)


def _count(path: str, *more: str) -> Cell:
    return lambda obj, _now: sum(len(jsonpath(obj, p) or ()) for p in (path, *more))


def _path(path: str, default: object = "<none>") -> Cell:
    def cell(obj: Obj, _now: float) -> object:
        value = jsonpath(obj, path)
        return default if value in (None, "") else value
    return cell


def _ratio(ready: str, wanted: str) -> Cell:
    return lambda obj, _now: f"{jsonpath(obj, ready) or 0}/{jsonpath(obj, wanted) or 0}"


def _ports(obj: Obj, _now: float) -> object:
    ports = (obj.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _event_object(obj: Obj, _now: float) -> object:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_last_seen(obj: Obj, now: float) -> object:
    return age(obj.get("lastTimestamp") or obj.get("eventTime")
               or _meta(obj).get("creationTimestamp"), now)


Column = tuple[str, str, Cell]
"""(header, type, cell function); every built-in table starts with Name."""

BUILTIN_COLUMNS: dict[str, tuple[Column, ...]] = {
    "v1/pods": (("Ready", "string", _pod_ready), ("Status", "string", _pod_status),
                ("Restarts", "string", _pod_restarts), ("Age", "string", _created)),
    "v1/configmaps": (("Data", "integer", _count(".data", ".binaryData")),
                      ("Age", "string", _created)),
    "v1/secrets": (("Type", "string", _path(".type", "Opaque")),
                   ("Data", "integer", _count(".data")), ("Age", "string", _created)),
    "v1/services": (("Type", "string", _path(".spec.type", "ClusterIP")),
                    ("Cluster-IP", "string", _path(".spec.clusterIP")),
                    ("External-IP", "string", _path(".spec.externalIPs[0]")),
                    ("Port(s)", "string", _ports), ("Age", "string", _created)),
    "v1/namespaces": (("Status", "string", _path(".status.phase", "Active")),
                      ("Age", "string", _created)),
    "apps/v1/statefulsets": (("Ready", "string", _ratio(".status.readyReplicas",
                                                        ".spec.replicas")),
                             ("Age", "string", _created)),
    "apps/v1/deployments": (("Ready", "string", _ratio(".status.readyReplicas",
                                                       ".spec.replicas")),
                            ("Up-to-date", "integer", _path(".status.updatedReplicas", 0)),
                            ("Available", "integer", _path(".status.availableReplicas", 0)),
                            ("Age", "string", _created)),
    "apps/v1/replicasets": (("Desired", "integer", _path(".spec.replicas", 0)),
                            ("Current", "integer", _path(".status.replicas", 0)),
                            ("Ready", "integer", _path(".status.readyReplicas", 0)),
                            ("Age", "string", _created)),
    "coordination.k8s.io/v1/leases": (("Holder", "string", _path(".spec.holderIdentity", "")),
                                      ("Age", "string", _created)),
}
"""Columns of the built-in kinds after Name (kinds not listed get Name and Age)."""

_EVENT_COLUMNS: tuple[Column, ...] = (
    ("Last Seen", "string", _event_last_seen), ("Type", "string", _path(".type", "")),
    ("Reason", "string", _path(".reason", "")), ("Object", "string", _event_object),
    ("Message", "string", _path(".message", "")),
)
"""Events lead with Last Seen; their Name column is hidden (priority 1), as in Kubernetes."""


def _columns(spec: resources.ResourceSpec) -> tuple[list[dict[str, Any]], list[Cell]]:
    """Column definitions and cell functions for a kind (Name first)."""
    if spec.plural == "events":
        definitions = [{"name": h, "type": t, "format": "", "description": "", "priority": 0}
                       for h, t, _ in _EVENT_COLUMNS]
        definitions.append({**_NAME_COLUMN, "priority": 1})
        name: Cell = lambda obj, _now: _meta(obj).get("name", "")  # noqa: E731
        return definitions, [c for _, _, c in _EVENT_COLUMNS] + [name]
    definitions = [dict(_NAME_COLUMN)]
    cells: list[Cell] = [lambda obj, _now: _meta(obj).get("name", "")]
    if spec.columns:
        for column in spec.columns:
            definitions.append({
                "name": column.name, "type": column.type, "format": column.format,
                "priority": column.priority,
                "description": column.description or ("Custom resource definition column "
                                                      f"(in JSONPath format): {column.json_path}"),
            })
            cells.append(_custom(column))
        return definitions, cells
    for header, kind, cell in BUILTIN_COLUMNS.get(
            spec.key, (("Age", "string", _created),)):
        definitions.append({"name": header, "type": kind, "format": "", "description": "",
                            "priority": 0})
        cells.append(cell)
    return definitions, cells


def _custom(column: resources.PrinterColumn) -> Cell:
    return lambda obj, now: _typed(column.type, jsonpath(obj, column.json_path), now)


def _row_object(obj: Obj, include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return dict(obj)
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": dict(_meta(obj))}


def table(spec: resources.ResourceSpec, objects: Sequence[Obj], *, now: float,
          resource_version: str = "", include_object: str = "Metadata",
          headers: bool = True) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``objects`` (``includeObject``: None|Metadata|Object)."""
    definitions, cells = _columns(spec)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": [cell(obj, now) for cell in cells]}
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    result: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                              "metadata": {"resourceVersion": resource_version}, "rows": rows}
    if headers:
        result["columnDefinitions"] = definitions
    return result
