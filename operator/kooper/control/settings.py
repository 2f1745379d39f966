"""A Connector's config or state change reaches the members that run it.

A document is applied only when its generation is newer than the last one the
worker accepted, and a round whose assignment did not change writes nothing. So a
changed ``config`` (or ``paused`` / ``running``) needs its own rewrite: every member
whose document names the connector (its instance or any of its tasks) gets a newer
generation carrying the new config and state; the worker restarts what changed
(docs/protocol.md, "What a worker does with an assignment").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kooper.control import reissue
from kooper.core import model

Settings = Mapping[str, tuple[Mapping[str, str] | None, str | None]]
"""connector → (config, state) as the documents last carried them."""


def to_carry(configs: Mapping[str, Mapping[str, str]], states: Mapping[str, str]) -> dict[
        str, tuple[Mapping[str, str] | None, str | None]]:
    """What the documents should carry for every Connector."""
    return {name: (configs.get(name), states.get(name)) for name in {*configs, *states}}


def changed(written: Settings, now: Settings) -> frozenset[str]:
    """Connectors the documents named with another config or state than ``now``."""
    if written is now:  # the last round carried these very settings
        return frozenset()
    return frozenset(name for name, was in written.items()
                     if name in now and tuple(now[name]) != tuple(was))


def rewrite(plan: model.Plan, connectors: Iterable[str]) -> model.Plan:
    """``plan`` where every member running one of ``connectors`` gets a newer document."""
    names = frozenset(connectors)
    if not names:
        return plan
    return reissue.reissue(plan, (member for member, part in plan.members.items()
                                  if _names_any(part.assigned, names)))


def _names_any(resources: model.ConnectorsAndTasks, names: frozenset[str]) -> bool:
    if not resources.connectors.isdisjoint(names):
        return True
    return any(model.task_connector(task) in names for task in resources.tasks)
