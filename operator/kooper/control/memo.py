"""Per-member memos a step keeps between rounds (in ``inputs.Caches``): a value
recomputed only when what it was computed from is a new object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

from kooper.core import ids

T = TypeVar("T")


class PerMember(Generic[T]):
    """Per member, a value computed from three objects, reused while the member's next
    round passes the very same three (``is``, not ``==``: a hit costs three identity
    checks where a recomputation walks sets of thousands). ``keep`` forgets members gone.
    """

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: dict[ids.WorkerId, tuple[object, object, object, T]] = {}

    def get(self, member: ids.WorkerId, a: object, b: object, c: object) -> T | None:
        """The value computed from ``(a, b, c)`` for ``member`` last time, or None."""
        cached = self.seen.get(member)
        if cached is not None and cached[0] is a and cached[1] is b and cached[2] is c:
            return cached[3]
        return None

    def put(self, member: ids.WorkerId, a: object, b: object, c: object, value: T) -> T:
        """Remember ``value`` as computed from ``(a, b, c)``; returns it."""
        self.seen[member] = (a, b, c, value)
        return value

    def keep(self, members: Mapping[ids.WorkerId, object]) -> None:
        """Forget every member not in ``members``."""
        if len(self.seen) > len(members):
            for member in self.seen.keys() - members.keys():
                del self.seen[member]
