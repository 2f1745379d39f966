"""Identifier types, so mypy catches a worker id passed where a resource id is wanted."""

import itertools
import operator
from collections.abc import Iterable, Iterator
from typing import NewType, cast

WorkerId = NewType("WorkerId", str)
"""A member's stable identity: its pod name (``workers-0``)."""

ConnectorName = NewType("ConnectorName", str)
"""A connector's name, which is also the id of its connector instance."""

TaskId = NewType("TaskId", str)
"""A task's id, ``<connector>-<n>`` (``A-0``)."""


# --- the one task-id parser -------------------------------------------------------
# A task id is ``<connector>-<n>``; the connector is everything before the LAST dash,
# so connectors may have dashes and end in digits (task 2 of ``db-1`` is ``db-1-2``).
# Whether a string is a connector instance or a task cannot be told from the string
# (``db-1`` is both connector ``db-1`` and task 1 of ``db``): callers know it from the
# set it came from (``ConnectorsAndTasks.connectors`` or ``.tasks``).


_FIRST = operator.itemgetter(0)


def task_id(connector: str, number: int) -> TaskId:
    """The id of task ``number`` of ``connector`` (``task_id("A", 0) == "A-0"``)."""
    return TaskId(f"{connector}-{number}")


def task_ids(connector: str, count: int) -> list[TaskId]:
    """The ids of a connector's ``count`` tasks, in number order (``task_id`` of each)."""
    prefix = f"{connector}-"
    return cast(list[TaskId], [prefix + str(number) for number in range(count)])


def task_connector(task: str) -> ConnectorName:
    """The connector of a task id (``"a-b-2"`` → ``"a-b"``)."""
    return ConnectorName(task.rpartition("-")[0])


def task_connectors(tasks: Iterable[str]) -> Iterator[ConnectorName]:
    """``task_connector`` of each task, in order, without a Python call per task."""
    return map(_FIRST, map(str.rpartition, tasks, itertools.repeat("-")))


def task_number(task: str) -> int:
    """The number of a task id within its connector (``"a-b-2"`` → 2)."""
    return int(task.rpartition("-")[2])


def split_task(text: str) -> tuple[ConnectorName, int] | None:
    """``(connector, number)`` if ``text`` is shaped like a task id, else None."""
    connector, sep, number = text.rpartition("-")
    if not sep or not connector or not number.isascii() or not number.isdigit():
        return None
    return ConnectorName(connector), int(number)
