"""A WorkerGroup's ``spec.selector``: a ``metav1.LabelSelector``, parsed and matched (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True, slots=True)
class Selector:
    """A parsed ``metav1.LabelSelector``; an empty selector matches nothing here."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the selector has no terms (the CRD forbids it; we match nothing)."""
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod's labels satisfy every term."""
        if self.empty:
            return False
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for key, operator, values in self.expressions:
            present = key in labels
            if operator == "In" and not (present and labels[key] in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True


def parse_selector(raw: object) -> Selector:
    """Parse a LabelSelector mapping; unknown operators make the selector match nothing."""
    if not isinstance(raw, Mapping):
        return Selector()
    labels = raw.get("matchLabels") or {}
    pairs = tuple(sorted((str(k), str(v)) for k, v in labels.items())) if isinstance(
        labels, Mapping
    ) else ()
    expressions: list[tuple[str, str, frozenset[str]]] = []
    for term in raw.get("matchExpressions") or ():
        if not isinstance(term, Mapping):
            return Selector()
        operator = str(term.get("operator", ""))
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return Selector()
        values = frozenset(str(v) for v in term.get("values") or ())
        expressions.append((str(term.get("key", "")), operator, values))
    return Selector(pairs, tuple(expressions))
