"""Field validation (``?fieldValidation=Strict|Warn``): unknown fields, against a CRD's schema.

The real API server decodes a request strictly when asked and names every
field its schema does not know (``strict decoding error: unknown field
"spec.foo"``). The emulator does the same for kinds that carry a schema (the
CRDs); built-in kinds have no schema here and are taken as they are. Values
are not checked (types, enums, minimums and CEL rules are the real control
plane's job: docs/emulator.md).
"""

from collections.abc import Mapping
from typing import Any

_ALWAYS_KNOWN = frozenset({"apiVersion", "kind", "metadata"})


def unknown_fields(schema: Mapping[str, Any] | None, obj: Any, path: str = "") -> list[str]:
    """Dotted paths of ``obj``'s fields that ``schema`` does not declare, in document order."""
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(obj, Mapping):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, value in obj.items():
            here = f"{path}.{key}" if path else str(key)
            if not path and key in _ALWAYS_KNOWN:
                continue
            if properties is not None and key in properties:
                found.extend(unknown_fields(properties[key], value, here))
            elif isinstance(additional, Mapping):
                found.extend(unknown_fields(additional, value, here))
            elif properties is not None or additional is False:
                found.append(here)
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(obj):
            found.extend(unknown_fields(schema["items"], item, f"{path}[{index}]"))
    return found


def strict_error(kind: str, version: str, unknown: list[str]) -> str:
    """The real API server's message for a strict decode that met unknown fields."""
    fields = ", ".join(f'unknown field "{f}"' for f in unknown)
    return f'{kind} in version "{version}" cannot be handled as a {kind}: ' \
           f"strict decoding error: {fields}"
