"""``control.memo.PerMember``: a member's value is reused only while every input it
was computed from is the very same object; the claims that use it recompute otherwise."""

from __future__ import annotations

from kooper.control import claims
from kooper.control.inputs import Caches
from kooper.control.memo import PerMember
from kooper.core import ids, model

W = ids.WorkerId


def test_a_value_is_reused_only_for_the_same_three_objects():
    memo: PerMember[str] = PerMember()
    a, b, c = object(), object(), object()
    assert memo.get(W("m"), a, b, c) is None
    assert memo.put(W("m"), a, b, c, "v") == "v"
    assert memo.get(W("m"), a, b, c) == "v"
    for other in ((object(), b, c), (a, object(), c), (a, b, object())):
        assert memo.get(W("m"), *other) is None, other
    assert memo.get(W("n"), a, b, c) is None


def test_an_equal_but_new_object_is_a_miss():
    memo: PerMember[str] = PerMember()
    memo.put(W("m"), frozenset({"x"}), None, None, "v")
    assert memo.get(W("m"), frozenset({"x"}), None, None) is None


def test_keep_forgets_the_members_gone():
    memo: PerMember[int] = PerMember()
    for name in "abc":
        memo.put(W(name), None, None, None, 1)
    memo.keep({W("b"): None})
    assert list(memo.seen) == [W("b")]


def owning(*tasks: str) -> model.Member:
    return model.Member(W("m"), model.ConnectorsAndTasks.of([], tasks), 3,
                        frozenset(model.Protocol), "1")


def test_false_claims_follow_a_new_document_for_the_same_report():
    caches = Caches()
    configured = model.ConnectorsAndTasks.of(["A"], ["A-0", "A-1"])
    member = owning("A-0", "A-1")
    first = {W("m"): model.ConnectorsAndTasks.of([], ["A-0"])}
    second = {W("m"): model.ConnectorsAndTasks.of([], ["A-0", "A-1"])}
    at = {W("m"): 3}
    found = claims.false({W("m"): member}, assigned=first, assigned_at=at,
                         configured=configured, caches=caches)
    assert found == {W("m"): model.ConnectorsAndTasks.of([], ["A-1"])}
    assert claims.false({W("m"): member}, assigned=second, assigned_at=at,
                        configured=configured, caches=caches) == {}


def test_unknown_claims_follow_a_new_document_for_the_same_member():
    caches = Caches()
    configured = model.ConnectorsAndTasks.of(["A"], ["A-0", "A-1"])
    member = owning("A-0", "A-1")
    before = {W("m"): ("1", model.ConnectorsAndTasks.of([], ["A-0"]))}
    after = {W("m"): ("1", model.ConnectorsAndTasks.of([], ["A-0", "A-1"]))}
    assert claims.unknown({W("m"): member}, given=before, configured=configured,
                          caches=caches) == {W("m"): model.ConnectorsAndTasks.of([], ["A-1"])}
    assert claims.unknown({W("m"): member}, given=after, configured=configured,
                          caches=caches) == {}
