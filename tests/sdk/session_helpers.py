"""Drive a sans-I/O session the way a transport would, recording what it did."""

from kooper.core import model
from kooper.protocol import messages
from kooper.sdk import session as sdk_session

CAT = model.ConnectorsAndTasks.of
BOTH = frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE})
EAGER_ONLY = frozenset({model.Protocol.EAGER})


def new_session(protocols=BOTH, lease_ms=30_000, name="w-0"):
    session = sdk_session.Session(
        member_name=name, incarnation="i1", protocols=protocols, lease_duration_ms=lease_ms
    )
    session.join(0)
    return session


def assignment(
    generation,
    connectors=(),
    tasks=(),
    *,
    revoked=((), ()),
    protocol="compatible",
    epochs=None,
    configs=None,
    name="w-0",
    states=None,
    incarnation="",
):
    return messages.Assignment(
        group="g",
        member=name,
        generation=generation,
        protocol=model.Protocol(protocol),
        assigned=CAT(connectors, tasks),
        revoked=CAT(*revoked),
        epochs=epochs or {},
        configs=configs or {},
        states=states or {},
        incarnation=incarnation,
    )


def drive(session, errors=None):
    """Run every batch to completion; returns the batches (lists of actions)."""
    errors = errors or {}
    batches = []
    while batch := session.next_actions():
        batches.append(batch)
        for action in batch:
            key = (type(action).__name__, getattr(action, "resource", None))
            session.done(action, error=errors.get(key))
    return batches


def flat(batches, kind):
    return [a for batch in batches for a in batch if isinstance(a, kind)]
