"""Label and field selectors in the API server's query-string syntax.

Label selectors: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`
(exists), `!a` (does not exist), joined by commas (AND).

Field selectors: `path=value`, `path==value`, `path!=value` joined by commas.
The real API server accepts only a few fields per kind (always
`metadata.name` and `metadata.namespace`); the emulator accepts any dotted
path into the object and compares the value as a string.
"""

import dataclasses
import re
from collections.abc import Mapping
from typing import Any


class SelectorError(ValueError):
    """A selector that does not parse (the API server answers 400 BadRequest)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Requirement:
    """One comma-separated term: key, operator and values."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label map satisfies this term."""
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" also match objects without the label, as in Kubernetes.
        return not present or labels[self.key] not in self.values


_SET_TERM = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\((.*)\)\s*$")
_EQ_TERM = re.compile(r"^\s*([^!=\s]+)\s*(==|=|!=)\s*(\S*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^!=\s()]+)\s*$")


def _split_terms(text: str) -> list[str]:
    # Commas inside "in (a,b)" do not separate terms.
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [term for term in terms if term.strip()]


def parse_labels(text: str | None) -> tuple[Requirement, ...]:
    """Parse a `labelSelector` query value; empty or None selects everything."""
    if not text:
        return ()
    result: list[Requirement] = []
    for term in _split_terms(text):
        if m := _SET_TERM.match(term):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            result.append(Requirement(m.group(1), m.group(2), values))
        elif m := _EQ_TERM.match(term):
            op = "!=" if m.group(2) == "!=" else "="
            result.append(Requirement(m.group(1), op, frozenset([m.group(3)])))
        elif m := _EXISTS_TERM.match(term):
            result.append(Requirement(m.group(2), "!" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {term.strip()!r}")
    return tuple(result)


def parse_fields(text: str | None) -> tuple[Requirement, ...]:
    """Parse a `fieldSelector` query value (only `=`, `==`, `!=`)."""
    if not text:
        return ()
    result: list[Requirement] = []
    for term in _split_terms(text):
        m = _EQ_TERM.match(term)
        if not m:
            raise SelectorError(f"invalid field selector: {term.strip()!r}")
        op = "!=" if m.group(2) == "!=" else "="
        result.append(Requirement(m.group(1), op, frozenset([m.group(3)])))
    return tuple(result)


def _field_value(obj: Mapping[str, Any], path: str) -> str | None:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def matches(
    obj: Mapping[str, Any],
    labels: tuple[Requirement, ...],
    fields: tuple[Requirement, ...],
) -> bool:
    """Whether an object passes both selectors."""
    if labels:
        meta = obj.get("metadata") or {}
        object_labels = meta.get("labels") or {}
        if not all(req.matches(object_labels) for req in labels):
            return False
    for req in fields:
        value = _field_value(obj, req.key)
        # A missing field compares as "" (cluster-scoped objects have namespace "").
        value = "" if value is None else value
        if (value in req.values) != (req.op == "="):
            return False
    return True
