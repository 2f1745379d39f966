"""Bad input a round reports: malformed reports, and members claiming work they were
never given (``UnknownClaim``), as (reason, message) pairs and once-per-subject Events.
"""

from __future__ import annotations

from collections.abc import Mapping

from kooper.control import events, snapshot, status
from kooper.control.inputs import Caches
from kooper.core import ids, model


def problems(out: events.Recorder, *, found: snapshot.Members, snap: model.Snapshot,
             configured: model.ConnectorsAndTasks,
             given: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]],
             caches: Caches) -> tuple[tuple[str, str], ...]:
    """Every problem seen this round; posts each new one once (``out``)."""
    found_problems: list[tuple[str, str]] = []
    for issue in found.issues:
        found_problems.append((issue.reason, issue.message))
        out.once(issue.reason, f"{issue.member}:{issue.message}", issue.message,
                 member=issue.member)
    seen = caches.claims
    for member_id, member in snap.members.items():
        known = given.get(member_id)
        cached = seen.get(member_id)
        if cached is not None and cached[0] is member and cached[1] is known \
                and cached[2] is configured:
            claims = cached[3]  # Same objects as last round: 1,000 set operations saved.
        else:
            mine = known[1] if known and known[0] == member.incarnation else model.EMPTY
            claims = snapshot.unknown_claims(member, given=mine, configured=configured)
            seen[member_id] = (member, known, configured, claims)
        if claims:
            message = (f"{member_id} reports running {status.describe(claims)} it was never "
                       f"given ({', '.join(claims.sorted()[:5])}); they are revoked")
            found_problems.append(("UnknownClaim", message))
            out.once("UnknownClaim", f"{member_id}/{member.incarnation}", message,
                     member=member_id)
    if len(seen) > len(snap.members):
        for member_id in seen.keys() - snap.members.keys():
            del seen[member_id]
    if not found.pods:
        out.once("SelectorMatchesNoPods", "", "spec.selector matches no pod in this namespace")
    else:
        out.forget("SelectorMatchesNoPods", "")
    return tuple(found_problems)
