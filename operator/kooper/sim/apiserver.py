"""What the leader fence relies on, as the simulator models the API: versions and preconditions.

Every object an operator leader writes (each member's ConfigMap, the WorkerGroup
status) has a ``resourceVersion``, bumped by every write, and carries the leader
epoch of the term that wrote it last. A term writes with the versions it read (at its
restore, after its fence) or got back from its own writes as preconditions, the way
``shell.writes.Writer`` does:

* **replace** (a ConfigMap the term knows): lands if the version is the one it holds;
  a 409 re-reads, and a newer epoch there ends the term (``LostLeadership``), an older
  or equal one is retried over; a 404 (deleted behind its back) ends the round too.
* **create** (a ConfigMap it does not know): lands if the name is free; a 409 re-reads,
  as a replace.
* **delete**: preconditioned on the version it holds (or re-reads); absent is fine.
* **status** (the merge patch): preconditioned on the status version it holds.

Before a write is even sent, a version the term holds that carries a newer epoch ends
it (``Writer.outranked``). ``decide`` is that rule, pure; ``Store`` keeps the versions.
With the fence off (``fencing=False``) nothing is preconditioned: every write lands.
"""

from __future__ import annotations

import dataclasses
import enum

STATUS = "status"
"""The key of the WorkerGroup status (a member's ConfigMap's key is the member name)."""


class Kind(enum.StrEnum):
    """A leader write's kind (one line each in docs/protocol.md, "Fencing the leader")."""

    PUT = "put"
    """A ConfigMap written: a replace when the term holds its version, else a create."""
    DELETE = "delete"
    STATUS = "status"
    REISSUE = "reissue"
    """The fence: a ConfigMap rewritten unchanged but for the new term's epoch."""
    CLAIM = "claim"
    """The fence: the status claimed under the new term's epoch."""


class Verdict(enum.StrEnum):
    """What the API made of a write."""

    LANDS = "lands"
    LOST = "lost"
    """Refused (409 with a newer epoch re-read, a 404 on a replace, or outranked before it
    was sent): the term's leadership is over and it writes nothing more."""


@dataclasses.dataclass(frozen=True, slots=True)
class Version:
    """One object's ``resourceVersion`` and the leader epoch of the term that wrote it."""

    rv: int
    epoch: int


def decide(current: Version | None, held: Version | None, *, kind: Kind, epoch: int,
           fencing: bool = True) -> Verdict:
    """The verdict on a write by the term of ``epoch`` holding version ``held`` (None: it
    holds none) of an object now at ``current`` (None: absent)."""
    if not fencing:
        return Verdict.LANDS
    if held is not None and held.epoch > epoch:
        return Verdict.LOST  # outranked: never sent
    if held is not None and current is not None and current.rv == held.rv:
        return Verdict.LANDS  # the precondition holds
    if current is None:
        # A replace of something deleted behind its back restores (the round ends);
        # a delete of something absent is done; a create of a free name lands.
        return Verdict.LOST if kind is Kind.PUT and held is not None else Verdict.LANDS
    # A 409 (or, for a create or an unread delete, a re-read): retried over the version
    # re-read unless a newer leader wrote it.
    return Verdict.LOST if current.epoch > epoch else Verdict.LANDS


@dataclasses.dataclass(slots=True)
class Store:
    """The versions of the objects the leaders write (the simulator keeps their contents)."""

    versions: dict[str, Version] = dataclasses.field(default_factory=dict)
    last_rv: int = 0

    def wrote(self, key: str, epoch: int) -> Version:
        """A write of ``key`` by the term of ``epoch`` landed: its new version."""
        self.last_rv += 1
        version = Version(self.last_rv, epoch)
        self.versions[key] = version
        return version

    def deleted(self, key: str) -> None:
        """``key`` was deleted (absent already is fine)."""
        self.versions.pop(key, None)

    def get(self, key: str) -> Version | None:
        """The current version of ``key`` (None: absent)."""
        return self.versions.get(key)

    def snapshot(self) -> dict[str, Version]:
        """Every current version (what a term reads when it restores)."""
        return dict(self.versions)


@dataclasses.dataclass(slots=True)
class Term:
    """One leader's term: its epoch and the versions it holds."""

    epoch: int
    held: dict[str, Version] = dataclasses.field(default_factory=dict)
    over: bool = False
    """Its leadership ended (a write of it was refused): it writes nothing more."""


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One leader write as the API saw it (the step's write order, with the fence's say)."""

    ts_ms: int
    epoch: int
    """The writing term's leader epoch."""
    kind: Kind
    key: str
    verdict: Verdict
    stale: bool = False
    """Written by a term that a newer one had replaced (a stalled leader's late write)."""


def attempt(store: Store, term: Term, key: str, *, kind: Kind, fencing: bool = True,
            delete: bool = False) -> Verdict:
    """``term`` writes ``key``: the verdict, with the store and the term's versions updated
    (a refused write ends the term; a term that is over is refused everything)."""
    if term.over:
        return Verdict.LOST
    verdict = decide(store.get(key), term.held.get(key), kind=kind, epoch=term.epoch,
                     fencing=fencing)
    if verdict is Verdict.LOST:
        term.over = True
    elif delete:
        store.deleted(key)
        term.held.pop(key, None)
    else:
        term.held[key] = store.wrote(key, term.epoch)
    return verdict
