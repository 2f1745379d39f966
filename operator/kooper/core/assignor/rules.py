"""The policies as a table of rules, and the ``kooper`` policy's rules themselves.

``kip415`` reproduces the KIP text (its scenario tables are golden tests) and Kafka's
current assignor where the text pins nothing. ``kooper`` adds what Kubernetes tells
the leader and Kafka cannot know. Each row below names what a policy does; the
stages read the row, never the policy's name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kooper.core import ids, model
from kooper.core.assignor.draft import Draft

Lost = dict[ids.WorkerId, model.ConnectorsAndTasks]
"""Per origin (a departed member, or ``""`` for what a new KIP-415 leader cannot place),
the work lost with it and still waiting."""


@dataclasses.dataclass(frozen=True, slots=True)
class Rules:
    """What one policy does, rule by rule."""

    returning_identity: bool
    """A member back under its old name gets its lost work at once (``returning_identity``)."""
    permanent_departure: bool
    """Work of a member known not to return is free at once (``permanent_departure``)."""
    rollout: bool
    """During a rollout free work goes to updated members; balancing waits (``receivers``)."""
    spread: bool
    """A connector's tasks are spread over the members (``assignor.spread``)."""
    least_moved: bool
    """Balancing revokes what was handed out most often first (as ``moved_first`` says);
    else Kafka's order."""
    lost_as_one_pool: bool
    """Released lost work is placed over connectors and tasks as one pool (KIP-415's
    tables); else each kind on its own."""


RULES: dict[model.Policy, Rules] = {
    model.Policy.KIP415: Rules(
        returning_identity=False, permanent_departure=False, rollout=False,
        spread=False, least_moved=False, lost_as_one_pool=True,
    ),
    model.Policy.KOOPER: Rules(
        returning_identity=True, permanent_departure=True, rollout=True,
        spread=True, least_moved=True, lost_as_one_pool=False,
    ),
}


def returning_identity(
    lost: Lost, members: Mapping[ids.WorkerId, model.Member], nxt_c: Draft, nxt_t: Draft,
) -> None:
    """A member back under its old name gets its lost work at once, no delay.

    Kubernetes tells us what Kafka cannot: a StatefulSet pod that restarts keeps
    its name, so the resources lost with its previous incarnation are its own.
    """
    for member in sorted(lost.keys() & members.keys()):  # in member order
        own = lost.pop(member)
        if own:
            nxt_c.edit(member).update(own.connectors)
            nxt_t.edit(member).update(own.tasks)


def permanent_departure(lost: Lost, snapshot: model.Snapshot) -> None:
    """Work of a member known not to return (scale-down) is reassigned now.

    Waiting out the delay for a pod whose ordinal was scaled away only leaves
    its work stopped; drop it from ``lost`` so it is balanced as free work.
    """
    for member in snapshot.departed_permanently:
        lost.pop(member, None)


def receivers(snapshot: model.Snapshot, rules: Rules) -> frozenset[ids.WorkerId] | None:
    """During a rollout, free work goes to updated members; balancing waits.

    Kubernetes says which members a rollout is about to replace (``Snapshot.outdated``)
    and which already run the update revision (``Snapshot.updated``): see
    ``control.rollout``. While any outdated member is live (or ``Snapshot.rolling``
    says a roll is starting a pod), free work (a planned
    departure's, released lost work, new work) goes to the updated members (else
    to members that are not outdated, else to anyone), least loaded first; and no
    member revokes for balance: the roll's next departure fills the member that
    came back last, and balancing resumes once nobody is outdated. Returns the
    members that may receive free work (None: everyone, no rollout).
    """
    if not rules.rollout or not (snapshot.outdated or snapshot.rolling):
        return None
    live = snapshot.members
    outdated = snapshot.outdated
    if not snapshot.rolling and not any(member in live for member in outdated):
        return None
    updated = frozenset(m for m in snapshot.updated if m in live and m not in outdated)
    if updated:
        return updated
    others = frozenset(m for m in live if m not in outdated)
    return others or frozenset(live)


def moved_first(snapshot: model.Snapshot) -> bool:
    """Whether a member's balancing revocations go by epochs before spreading the picks.

    While the members span two revisions (some on the update revision, others left on
    the old one by a StatefulSet's ``partition``), the work a roll moved goes back
    first: each member gives up what was handed out most often, so a pod the roll
    leaves alone gives back what it was handed and keeps its own. Otherwise a member
    gives up first tasks of the connectors fewest others give up this round: a join's
    revocations then go to the joiner without two tasks of one connector, the group
    stays spread and nobody else moves (``revoking.pick_spread_tasks``).
    """
    updated = snapshot.updated
    return bool(updated) and any(member not in updated for member in snapshot.members)
