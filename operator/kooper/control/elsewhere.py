"""Work and pods the group shares with the rest of its namespace (pure).

Three rules, each found by a probe that ran work on two pods or left a group stuck
(docs/operator.md, "Work running outside the group"): ``held`` (a connector that moved
here waits until it stopped where it ran), ``strays`` (a member whose pod was relabelled
out keeps its work while it renews, ``liveness._renewed``) and ``taken`` (a pod two
groups' selectors match belongs to the older group).

A Connector's ``spec.workerGroup`` changed, or a Connector was deleted and created
again naming another WorkerGroup: the old group's operator revokes its work, and its
workers stop it in their own time (a flush, a commit). Resource names are unique in a
namespace, not in a group, so nothing in the new group's own members says that work
still runs. Its operator must not start it before it stopped, or it runs on two pods.

So a connector of this group that none of its members holds, was assigned or lost
waits while a live Lease outside the group (its pod matches another selector, or none)
reports running any of its resources: it is left out of the round, as if not created
yet, and a ``ConnectorHeldElsewhere`` problem says where it runs. It is planned in the
round after the last such report drops it, or after that Lease expired (its worker
fenced itself). A connector part of which this group already holds is not held back:
a report never takes work from a member.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from kooper.control import events, liveness, views
from kooper.core import ids, model


@dataclasses.dataclass(frozen=True, slots=True)
class Outside:
    """Connectors of this group whose work runs outside it, and until when to look again."""

    connectors: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """connector → ``"<resource> on <pod>"``, one place it still runs."""
    until_ms: int | None = None
    """When the first of those Leases expires unless renewed: plan again then."""


NOTHING = Outside()


def taken(group: views.GroupView, others: Sequence[views.GroupView],
          pods: Iterable[views.PodView]) -> dict[str, str]:
    """pod name → the older WorkerGroup whose selector matches it too (by creation time,
    then name): it belongs to that one, and this group leaves it out.

    Two groups cannot both lead one pod: its ConfigMap ``kooper-<pod>`` is one object,
    and each would hand it its own work. Found on the embedded plane: the second group
    stayed ``RevokingForBalance``, its connector never ran, and nothing said why.
    """
    seniors = [g for g in others if (g.created, g.name) < (group.created, group.name)
               and not g.invalid]
    if not seniors:
        return {}
    result: dict[str, str] = {}
    for pod in pods:
        if group.selector.matches(pod.labels):
            for senior in seniors:
                if senior.selector.matches(pod.labels):
                    result[pod.name] = senior.name
                    break
    return result


def held(connectors: Sequence[views.ConnectorView], leases: Sequence[views.LeaseView], *,
         matching: Mapping[str, views.PodView], state: model.PlanState,
         members: Mapping[ids.WorkerId, model.Member], observed: liveness.Observed,
         now_ms: int, default_duration_s: int, skew_s: int) -> Outside:
    """The connectors to leave out of this round (see the module docstring).

    ``matching`` are the group's pods by name, ``state`` the last round's plan, ``members``
    the members as found (each with what it reports running), ``observed`` when each
    Lease's current version was first seen.
    """
    mine = {c.name for c in connectors}
    running: dict[str, str] = {}
    until: int | None = None
    for lease in leases:
        report = lease.report
        if lease.member in matching or report is None or not report.owned:
            continue
        seen = observed.get(lease.name)
        expires = liveness.expires_at_ms(lease, observed_ms=seen[1] if seen else now_ms,
                                         default_duration_s=default_duration_s, skew_s=skew_s)
        if expires is None or expires <= now_ms:
            continue  # never renewed, or its worker fenced itself
        found = False
        for connector, resource in (
                *((c, c) for c in report.owned.connectors),
                *((ids.task_connector(t), t) for t in report.owned.tasks)):
            if connector in mine and connector not in running:
                running[connector] = f"{resource} on {lease.member}"
                found = True
        if found and (until is None or expires < until):
            until = expires
    if not running:
        return NOTHING
    for connector in _held_here(state, members, running.keys()):
        del running[connector]
    return Outside(running, until) if running else NOTHING


def _held_here(state: model.PlanState, members: Mapping[ids.WorkerId, model.Member],
               connectors: Iterable[str]) -> set[str]:
    """Of ``connectors``, those this group's members hold, were assigned or lost."""
    wanted = set(connectors)
    here: set[str] = set()
    sets = (*state.assignments.values(), *state.revoking.values(), *state.lost.values(),
            *(m.owned for m in members.values()))
    for resources in sets:
        here.update(wanted.intersection(resources.connectors))
        here.update(wanted.intersection(ids.task_connectors(resources.tasks)))
        if here == wanted:
            break
    return here


def strays(kept: Mapping[ids.WorkerId, liveness.Vanished], pods: Iterable[views.PodView],
           matching: Mapping[str, views.PodView]) -> dict[ids.WorkerId, liveness.Vanished]:
    """Members kept while their process may run (``liveness.vanished``) whose pod is
    still there but no longer matches the selector: relabelled out of the group. Their
    work stays with them while they renew their Lease (``liveness._renewed``)."""
    if not kept:
        return {}
    names = {pod.name for pod in pods}
    return {m: v for m, v in kept.items() if m in names and m not in matching}


def problems(out: events.Recorder, outside: Outside,
             stray: Mapping[ids.WorkerId, liveness.Vanished] | None = None,
             shared: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """A ``ConnectorHeldElsewhere`` problem per connector held back, a
    ``MemberOutsideSelector`` one per stray member and a ``SelectorOverlap`` one for the
    pods an older group keeps (``taken``); each one's Event once."""
    found: list[tuple[str, str]] = []
    by_group: dict[str, list[str]] = {}
    for pod, senior in sorted((shared or {}).items()):
        by_group.setdefault(senior, []).append(pod)
    for senior, names in sorted(by_group.items()):
        message = (f"spec.selector also matches {len(names)} pod(s) of WorkerGroup {senior} "
                   f"({', '.join(names[:3])}), which is older and keeps them: this group "
                   "leaves them out; give the two groups selectors no pod matches both")
        found.append(("SelectorOverlap", message))
        out.once("SelectorOverlap", senior, message)
    for member, kept in sorted((stray or {}).items()):
        owned = kept.report.owned
        message = (f"pod {member} no longer matches spec.selector, but its worker still runs "
                   f"{len(owned)} resource(s) ({', '.join(owned.sorted()[:3])}); they stay "
                   "with it while it renews its Lease: restore its labels, or stop the pod, "
                   "to move them")
        found.append(("MemberOutsideSelector", message))
        out.once("MemberOutsideSelector", f"{member}/{kept.report.incarnation}", message,
                 member=member)
    for connector, where in sorted(outside.connectors.items()):
        message = (f"connector {connector} waits: {where}, outside this WorkerGroup, still "
                   "runs it (it moved here); it starts here once that stopped")
        found.append(("ConnectorHeldElsewhere", message))
        out.once("ConnectorHeldElsewhere", connector, message)
    return tuple(found)
