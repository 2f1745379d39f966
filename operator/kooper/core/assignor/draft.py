"""``Draft``: the members' sets of one kind while a round edits them, shared until edited."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from kooper.core import ids


class Draft:
    """Per-member resource sets, copied only when a member's set is edited.

    In a 100,000-task round most members keep exactly what they had; sharing
    their frozensets instead of copying them is most of the assignor's speed.
    """

    __slots__ = ("base", "edited")

    def __init__(self) -> None:
        self.base: dict[ids.WorkerId, frozenset[str]] = {}
        self.edited: dict[ids.WorkerId, set[str]] = {}

    def get(self, member: ids.WorkerId) -> AbstractSet[str]:
        """The member's set as it stands (do not mutate)."""
        edited = self.edited.get(member)
        return self.base[member] if edited is None else edited

    def copy(self) -> Draft:
        """An independent draft with the same sets (edited ones copied)."""
        other = Draft()
        other.base = self.base
        other.edited = {member: set(resources) for member, resources in self.edited.items()}
        return other

    def holdings(self) -> dict[ids.WorkerId, AbstractSet[str]]:
        """Every member's set as it stands, in member order (do not mutate)."""
        return {**self.base, **self.edited}  # an edited member keeps its place

    def size(self, member: ids.WorkerId) -> int:
        """How many resources the member holds now."""
        return len(self.get(member))

    def sizes(self) -> dict[ids.WorkerId, int]:
        """Every member's size, in member order."""
        sizes = dict(zip(self.base, map(len, self.base.values()), strict=True))
        for member, resources in self.edited.items():
            sizes[member] = len(resources)
        return sizes

    def edit(self, member: ids.WorkerId) -> set[str]:
        """A mutable copy of the member's set (made once)."""
        edited = self.edited.get(member)
        if edited is None:
            edited = self.edited[member] = set(self.base[member])
        return edited

    def frozen(self, member: ids.WorkerId) -> frozenset[str]:
        """The final set; the original object when the member was not edited."""
        edited = self.edited.get(member)
        return self.base[member] if edited is None else frozenset(edited)
