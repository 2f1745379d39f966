"""The one task-id parser: a connector's name may end in ``-<digits>``."""

import pytest

from kooper.core import ids, model


@pytest.mark.parametrize(("task", "connector", "number"), [
    ("A-0", "A", 0), ("db-1-2", "db-1", 2), ("a-b-2", "a-b", 2), ("x-10-10", "x-10", 10),
])
def test_a_task_id_is_its_connector_then_its_number_after_the_last_dash(task, connector,
                                                                        number):
    assert ids.task_connector(task) == connector
    assert ids.task_number(task) == number
    assert ids.split_task(task) == (connector, number)
    assert ids.task_id(connector, number) == task


@pytest.mark.parametrize("text", ["db", "a-b", "-1", "db-", "db-x", "db-١"])
def test_strings_not_shaped_like_a_task_id_are_not_split(text):
    assert ids.split_task(text) is None


def test_kip415_order_puts_each_instance_before_its_tasks_with_dashed_names():
    resources = model.ConnectorsAndTasks.of(["db", "a-b"], ["a-b-2", "a-b-0", "db-10", "db-9"])
    assert resources.sorted() == ["a-b", "a-b-0", "a-b-2", "db", "db-9", "db-10"]
