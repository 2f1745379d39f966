"""Our CRDs' OpenAPI schemas, offline: structural defaulting, JSON-schema checks and CEL rules.

The API server does three things with a custom resource: it applies the schema's
``default`` values, validates the result against ``openAPIV3Schema``, and runs the
``x-kubernetes-validations`` CEL rules. This module does the same with
``jsonschema`` and ``cel-python`` so the examples and hand-made bad objects can be
checked without a cluster. It knows only what our CRDs use.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterator
from typing import Any

import celpy
import jsonschema


def version_schema(crd: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    """The schema of ``version`` (default: the storage version)."""
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version or (version is None and entry.get("storage")):
            schema: dict[str, Any] = entry["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(version)


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: absent properties get their default."""
    value = copy.deepcopy(value)
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = apply_defaults(sub, value[key])
    elif isinstance(value, list) and "items" in schema:
        value = [apply_defaults(schema["items"], item) for item in value]
    return value


def schema_errors(schema: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """JSON-schema violations (x-kubernetes-* keywords are ignored by jsonschema)."""
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def rules(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every CEL rule with the path of the node it sits on (``spec.selector``)."""
    for rule in schema.get("x-kubernetes-validations", []):
        yield path or "<root>", rule
    for key, sub in schema.get("properties", {}).items():
        yield from rules(sub, f"{path}.{key}" if path else key)
    if "items" in schema:
        yield from rules(schema["items"], f"{path}[]")


def _values_at(schema: dict[str, Any], value: Any) -> Iterator[tuple[dict[str, Any], Any]]:
    yield schema, value
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                yield from _values_at(sub, value[key])
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            yield from _values_at(schema["items"], item)


_ENV = celpy.Environment()


def _sum(values: Any) -> Any:
    return celpy.celtypes.IntType(sum(values))


_GO_DURATION_MAX = 2**63 - 1
"""Go's longest ``time.Duration`` in nanoseconds (about 292 years)."""


def _duration(text: Any) -> Any:
    """cel-go's ``duration(string)``, which the API server runs: Go's ``time.ParseDuration``
    refuses more than about 292 years, where cel-python allows protobuf's 10,000."""
    value = celpy.celtypes.DurationType(text)
    if abs(value // datetime.timedelta(microseconds=1)) * 1000 > _GO_DURATION_MAX:
        raise ValueError(f"duration {text!r} out of Go's time.Duration range")
    return value


_FUNCTIONS = {"sum": _sum, "duration": _duration}
"""The Kubernetes CEL library functions our rules use that cel-python lacks
(``<list<int>>.sum()`` from the Kubernetes list library), and ``duration`` with the
range it has in the API server."""


def evaluate_cel(expression: str, activation: dict[str, Any]) -> Any:
    """Evaluate one CEL expression (JSON values bound as CEL values); errors are returned."""
    program = _ENV.program(_ENV.compile(expression), functions=_FUNCTIONS)
    return program.evaluate({k: _to_cel(v) for k, v in activation.items()})


def _to_cel(value: Any) -> Any:
    # Values computed by an earlier expression (a policy's variables) are CEL values already.
    if isinstance(value, dict):
        return celpy.celtypes.MapType(
            {celpy.celtypes.StringType(k): _to_cel(v) for k, v in value.items()}
        )
    if isinstance(
        value, celpy.celtypes.StringType | celpy.celtypes.IntType | celpy.celtypes.BoolType
    ):
        return value
    return celpy.json_to_cel(value)


def eval_cel(expression: str, activation: dict[str, Any]) -> bool:
    """Evaluate one CEL expression; an evaluation error fails the rule (as in the API server)."""
    result = evaluate_cel(expression, activation)
    if isinstance(result, celpy.CELEvalError):
        return False
    return bool(result)


def cel_errors(schema: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """Messages of the CEL rules that fail on ``obj`` (already defaulted)."""
    failed = []
    for node, value in _values_at(schema, obj):
        for rule in node.get("x-kubernetes-validations", []):
            try:
                ok = eval_cel(rule["rule"], {"self": value})
            except celpy.CELEvalError:
                ok = False
            if not ok:
                failed.append(rule.get("message", rule["rule"]))
    return failed


def admit(crd: dict[str, Any], obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Default, then validate like the API server: (the stored object, the errors)."""
    schema = version_schema(crd)
    stored = apply_defaults(schema, obj)
    return stored, schema_errors(schema, stored) + cel_errors(schema, stored)
