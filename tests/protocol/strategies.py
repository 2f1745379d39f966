"""Hypothesis strategies for protocol messages, shared by the codec tests."""

from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kooper.core import model
from kooper.protocol import messages

NAMES = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-."), min_size=1, max_size=12
)
ANY_TEXT = st.text(max_size=20)
# Names that trip a text-level encoder: dashed neighbours ("A" next to "A-1"), commas,
# quotes, digits only, non-ASCII and lone surrogates, and anything else hypothesis finds.
AWKWARD_NAMES = st.sampled_from(["A", "A-1", "A-10", "a,b", 'x"y', "0", "caf\u00e9", "\ud800"]) | (
    st.text(min_size=1, max_size=6)
)
INCARNATIONS = st.sampled_from(["", "5c1e0a77"]) | ANY_TEXT
EPOCHS = st.sampled_from([0, 0, 1]) | st.integers(0, 2**53)

UNHURRIED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Settings for every codec property test: a loaded CI machine is slow, not wrong."""


def assignment(*, tasks: Iterable[str] = (), **changes: Any) -> messages.Assignment:
    """A plain assignment (group "g", member "m", generation 1) of ``tasks``, with ``changes``."""
    fields: dict[str, Any] = {
        "group": "g",
        "member": "m",
        "generation": 1,
        "protocol": model.Protocol.COMPATIBLE,
        "assigned": model.ConnectorsAndTasks.of([], tasks),
    }
    return messages.Assignment(**(fields | changes))


@st.composite
def resources(draw: st.DrawFn, names: st.SearchStrategy[str] = NAMES) -> model.ConnectorsAndTasks:
    connectors = draw(st.frozensets(names, max_size=4))
    task_connectors = draw(st.frozensets(names, max_size=4))
    tasks = {
        f"{name}-{number}"
        for name in task_connectors
        for number in draw(st.frozensets(st.integers(0, 10_000), max_size=6))
    }
    return model.ConnectorsAndTasks(connectors, frozenset(tasks))


@st.composite
def assignments(draw: st.DrawFn, names: st.SearchStrategy[str] = NAMES) -> messages.Assignment:
    assigned = draw(resources(names))
    revoked = draw(resources(names)).difference(assigned)
    ids = assigned.sorted()
    epoch_keys = draw(st.sets(st.sampled_from(ids))) if ids else set()
    connectors = sorted({model.task_connector(t) for t in assigned.tasks} | assigned.connectors)
    return messages.Assignment(
        group=draw(NAMES),
        member=draw(NAMES),
        generation=draw(st.integers(0, 2**53)),
        protocol=draw(st.sampled_from(model.Protocol)),
        assigned=assigned,
        revoked=revoked,
        delay_ms=draw(st.integers(0, 10**9)),
        leader=draw(ANY_TEXT),
        epochs={key: draw(st.integers(0, 2**31)) for key in epoch_keys},
        configs={
            name: draw(st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=3))
            for name in draw(st.sets(st.sampled_from(connectors)))
        }
        if connectors
        else {},
        states=draw(st.dictionaries(NAMES, st.sampled_from(["paused", "stopped"]), max_size=2)),
        policy=draw(st.sampled_from(["", "kooper", "kip415"])),
        incarnation=draw(INCARNATIONS),
        member_epoch=draw(EPOCHS),
    )


def reports(names: st.SearchStrategy[str] = NAMES) -> st.SearchStrategy[messages.Report]:
    """Any valid report whose resource names come from ``names``."""
    return st.builds(
        messages.Report,
        member=NAMES,
        incarnation=ANY_TEXT,
        protocols=st.frozensets(st.sampled_from(model.Protocol), min_size=1),
        generation=st.integers(-1, 2**53),
        owned=resources(names),
        failed=st.dictionaries(NAMES, ANY_TEXT, max_size=3),
        fenced=st.booleans(),
        failure_counts=st.dictionaries(
            st.one_of(names, st.builds(lambda n, i: f"{n}-{i}", names, st.integers(0, 10_000))),
            st.integers(1, 1000),
            max_size=6,
        ),
        member_epoch=EPOCHS,
        left=st.booleans(),
    )
