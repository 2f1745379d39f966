"""``Memory``: its two parts, and the typed field names ``Memory.of``/``replace`` take."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from kooper.control import inputs
from kooper.control.inputs import Memory, Persisted, Volatile
from kooper.core import model


def _declared(annotation: object) -> str:
    return annotation.__forward_arg__ if isinstance(annotation, typing.ForwardRef) \
        else str(annotation)


def test_fields_are_exactly_those_of_both_parts_with_their_types() -> None:
    parts = {f.name: str(f.type) for part in (Persisted, Volatile)
             for f in dataclasses.fields(part)}
    typed = {name: _declared(a) for name, a in inputs.Fields.__annotations__.items()}
    assert typed == parts
    assert not {f.name for f in dataclasses.fields(Persisted)} & {
        f.name for f in dataclasses.fields(Volatile)}


def test_replace_routes_each_field_to_its_part() -> None:
    memory = Memory.of(held=True, hold_released="x")
    assert memory.volatile.held
    assert memory.persisted == Persisted()
    issued = inputs.Issued(member_epoch=3)
    again = memory.replace(issued=issued)
    assert again.persisted.issued is issued
    assert again.volatile is memory.volatile
    with pytest.raises(TypeError, match="no field 'member_epoch'"):
        memory.replace(member_epoch=3)  # type: ignore[call-arg]


def test_issuing_above_a_generation_raises_the_next_plans_and_nothing_else() -> None:
    memory = Memory.of(held=True, state=model.PlanState(generation=7))
    assert memory.issuing_above(7) is memory
    assert memory.issuing_above(3) is memory
    raised = memory.issuing_above(40)
    assert raised.persisted.state == dataclasses.replace(memory.persisted.state, generation=40)
    assert raised.volatile is memory.volatile
