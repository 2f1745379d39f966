"""Bad input a round reports: malformed reports, and members claiming work they were
never given (``UnknownClaim``), as (reason, message) pairs and once-per-subject Events.

A report never takes work from another member. A member that claims a resource the
previous round assigned to another live member, or that a departed member lost
(``foreign``), does not contest it:
the claim is left out of the snapshot, so the assignor keeps the resource with its
rightful owner, and the reporter alone gets a newer document without it (its
assigned set is a full replacement, so an SDK worker that did start it stops it;
``revoke_foreign``); lost work keeps waiting for its member. Only a claim on work
nobody else holds or lost counts as held by the reporter: the round revokes it from
the reporter before anyone else gets it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping

from kooper.control import events, reissue, snapshot, status
from kooper.control.inputs import Caches
from kooper.control.memo import PerMember
from kooper.core import ids, model

Claims = Mapping[ids.WorkerId, model.ConnectorsAndTasks]


def unknown(members: Mapping[ids.WorkerId, model.Member], *,
            given: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]],
            configured: model.ConnectorsAndTasks, caches: Caches) -> dict[
                ids.WorkerId, model.ConnectorsAndTasks]:
    """Each member's configured resources it reports owning but was never given."""
    seen = caches.claims
    result: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    for member_id, member in members.items():
        known = given.get(member_id)
        claims = seen.get(member_id, member, known, configured)
        if claims is None:
            mine = known[1] if known and known[0] == member.incarnation else model.EMPTY
            claims = seen.put(member_id, member, known, configured,
                              snapshot.unknown_claims(member, given=mine, configured=configured))
        if claims:
            result[member_id] = claims
    seen.keep(members)
    return result


def documented(members: Mapping[ids.WorkerId, model.Member],
               given: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]], *,
               every: bool = False) -> frozenset[ids.WorkerId]:
    """Members whose document for their current incarnation the operator holds; with
    ``every`` (a leader restored from the ConfigMaps: a member it found none for was
    given nothing, as an SDK worker runs only what a document for its incarnation
    assigns) every member."""
    if every:
        return frozenset(members)
    return frozenset(m for m, (incarnation, _) in given.items()
                     if m in members and members[m].incarnation == incarnation)


def false(members: Mapping[ids.WorkerId, model.Member], *,
          assigned: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
          assigned_at: Mapping[ids.WorkerId, int], configured: model.ConnectorsAndTasks,
          caches: Caches | None = None) -> dict[ids.WorkerId, model.ConnectorsAndTasks]:
    """Configured resources members claim beyond the latest document they acknowledge.

    An SDK worker reports a generation only once it stopped everything that document
    does not assign (its assigned set is a full replacement), so a report at or past
    the member's latest document that claims more is false, whatever it was given
    before; waiting for it to be let go would wait forever.
    """
    seen = caches.untrue if caches is not None else PerMember[model.ConnectorsAndTasks]()
    result: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    for member_id, member in members.items():
        at = assigned_at.get(member_id)
        mine = assigned.get(member_id)
        if at is None or mine is None or member.generation < at:
            continue
        owned = member.owned
        if owned is mine:
            continue
        extra = seen.get(member_id, owned, mine, configured)
        if extra is None:
            extra = seen.put(member_id, owned, mine, configured, model.EMPTY if (
                owned.connectors <= mine.connectors and owned.tasks <= mine.tasks) else (
                owned.difference(mine).intersection(configured)))
        if extra:
            result[member_id] = extra
    seen.keep(members)
    return result


@dataclasses.dataclass(frozen=True, slots=True)
class Facts:
    """What the verdict on one claim (a member reporting a resource) depends on."""

    forgotten: bool
    """The leader forgot the assignments (a new KIP-415 leader adopts what members report)."""
    documented: bool
    """The claimant has a ConfigMap of its incarnation (a leader that read none:
    ``kooper replay``)."""
    acknowledges: bool
    """Its report is at or past its latest document, which does not assign the resource
    (an SDK worker reports a generation only once it stopped all that document does
    not assign: the claim is false, and waiting for it to be let go would wait forever)."""
    elsewhere: bool
    """The previous round assigned the resource to another member, or another member
    lost it (departed: its work waits for its grace, and a claim must not end that wait
    by holding it and then letting it go)."""


VERDICTS: tuple[tuple[str, Callable[[Facts], bool], bool], ...] = (
    # (why, when, foreign?): the first row whose ``when`` holds decides.
    ("the ConfigMaps say what each member was given; a claim beyond it is not adopted",
     lambda f: f.forgotten and f.documented, True),
    ("no ConfigMap contradicts it: adopted, as KIP-415's leader does",
     lambda f: f.forgotten, False),
    ("its report acknowledges a document that does not assign it: false",
     lambda f: f.acknowledges, True),
    ("another member holds it, or lost it", lambda f: f.elsewhere, True),
    ("nobody else holds it: the reporter holds it (the round revokes it first)",
     lambda f: True, False),
)
"""How a claim on work no document gave the claimant is judged, in order."""


def verdict(facts: Facts) -> bool:
    """Whether a claim with these facts is foreign (left out of the snapshot)."""
    return next(foreign for _, when, foreign in VERDICTS if when(facts))


def foreign(claims: Claims, *, members: Mapping[ids.WorkerId, model.Member],
            previous: model.PlanState, documented: Collection[ids.WorkerId]
            ) -> tuple[dict[ids.WorkerId, model.Member], Claims]:
    """The members as the assignor should see them, and each member's foreign claims
    (``VERDICTS``; ``claims``: ``unknown`` and ``false`` claims together)."""
    if not claims:
        return dict(members), {}
    theirs: dict[str, ids.WorkerId] = {}
    if not previous.forgotten:
        for owner, resources in (*previous.lost.items(), *previous.assignments.items()):
            for resource in (*resources.connectors, *resources.tasks):
                theirs[resource] = owner
    seen = dict(members)
    found: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    for member_id, resources in sorted(claims.items()):
        reporter = members[member_id]
        at = previous.assigned_at.get(member_id)
        acknowledges = at is not None and reporter.generation >= at

        def judged(resource: str, member_id: ids.WorkerId = member_id,
                   acknowledges: bool = acknowledges) -> bool:
            return verdict(Facts(
                forgotten=previous.forgotten, documented=member_id in documented,
                acknowledges=acknowledges,
                elsewhere=theirs.get(resource, member_id) != member_id))

        taken = model.ConnectorsAndTasks(
            frozenset(filter(judged, resources.connectors)),
            frozenset(filter(judged, resources.tasks)))
        if taken:
            found[member_id] = taken
            seen[member_id] = dataclasses.replace(reporter,
                                                  owned=reporter.owned.difference(taken))
    return seen, found


def merged(*claims: Claims) -> Claims:
    """Several members' claims as one (a member in two: the union)."""
    result: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    for each in claims:
        for member_id, resources in each.items():
            known = result.get(member_id)
            result[member_id] = resources if known is None else known.union(resources)
    return result


def revoke_foreign(plan: model.Plan, found: Claims, *, done: Claims) -> model.Plan:
    """``plan`` where each member with foreign claims not answered yet (``done``) gets a
    new document: what the plan gives it, without them (a full replacement)."""
    due = {m: r for m, r in found.items()
           if m in plan.members and r.difference(done.get(m, model.EMPTY))}
    if not due:
        return plan
    # A full replacement, not a revocation: a document's revoked set is restored as work
    # the member may still hold (``restore.restore``), which a forged claim is not. Members
    # the plan rewrites anyway keep its generation; the rest get a newer one, or the
    # session would ignore a document no newer than the one it applied.
    return reissue.reissue(plan, due)


def problems(out: events.Recorder, *, found: snapshot.Members, claims: Claims,
             foreign: Claims, shared: bool = False) -> tuple[tuple[str, str], ...]:
    """Every problem seen this round; posts each new one once (``out``)."""
    found_problems: list[tuple[str, str]] = []
    for issue in found.issues:
        found_problems.append((issue.reason, issue.message))
        out.once(issue.reason, f"{issue.member}:{issue.message}", issue.message,
                 member=issue.member)
    for member_id, resources in sorted(claims.items()):
        taken = foreign.get(member_id, model.EMPTY)
        whose = (f"; {status.describe(taken)} of them belong to other members, which keep "
                 "them") if taken else ""
        message = (f"{member_id} reports running {status.describe(resources)} it was never "
                   f"given ({', '.join(resources.sorted()[:5])}); they are revoked from "
                   f"{member_id}{whose}")
        found_problems.append(("UnknownClaim", message))
        incarnation = found.members[member_id].incarnation if member_id in found.members \
            else ""
        out.once("UnknownClaim", f"{member_id}/{incarnation}", message, member=member_id)
    if not found.pods and not shared:  # (``shared``: it matches pods another group keeps)
        out.once("SelectorMatchesNoPods", "", "spec.selector matches no pod in this namespace")
    else:
        out.forget("SelectorMatchesNoPods", "")
    return tuple(found_problems)
