"""A resource lost from several members at once is placed once (issue 22's hard chaos,
families 4, seed 21824): it stays under one origin, the one that had it assigned."""

from kooper.core import ids, model
from kooper.core.assignor import lost as lost_stage


def ct(*tasks: str) -> model.ConnectorsAndTasks:
    return model.ConnectorsAndTasks(frozenset(), frozenset(tasks))


def test_a_resource_lost_twice_stays_with_the_member_it_was_assigned_to():
    a, b = ids.WorkerId("a"), ids.WorkerId("b")
    lost = {a: ct("t-0", "t-1"), b: ct("t-1", "t-2")}
    lost_stage.one_origin_each(lost, {b: ct("t-1")})
    assert lost == {a: ct("t-0"), b: ct("t-1", "t-2")}


def test_otherwise_with_the_first_origin_by_name_and_an_emptied_origin_goes():
    a, b = ids.WorkerId("a"), ids.WorkerId("b")
    lost = {b: ct("t-1"), a: ct("t-1", "t-3")}
    lost_stage.one_origin_each(lost, {})
    assert lost == {a: ct("t-1", "t-3")}


def test_nothing_lost_twice_is_left_as_it_is():
    a, b = ids.WorkerId("a"), ids.WorkerId("b")
    lost = {a: ct("t-0"), b: ct("t-1")}
    lost_stage.one_origin_each(lost, {})
    assert lost == {a: ct("t-0"), b: ct("t-1")}
