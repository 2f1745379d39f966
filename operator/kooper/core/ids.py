"""Identifier types, so mypy catches a worker id passed where a resource id is wanted."""

from typing import NewType

WorkerId = NewType("WorkerId", str)
"""A member's stable identity: its pod name (``workers-0``)."""

ConnectorName = NewType("ConnectorName", str)
"""A connector's name, which is also the id of its connector instance."""

TaskId = NewType("TaskId", str)
"""A task's id, ``<connector>-<n>`` (``A-0``)."""
