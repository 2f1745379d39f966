"""Load arithmetic: who should hold how many, what to revoke, where free work goes.

Pure functions over plain sets. The assignor calls them once per resource class:
under the ``kooper`` policy connectors and tasks are balanced separately (each
differs by at most one between members) and a connector's tasks are spread over
members before any member gets a second one (the defect KAFKA-17049 reports);
under ``kip415`` each kind is balanced on its own too (Kafka's current assignor), and
only lost work is placed over connectors and tasks as one pool, as the KIP's tables do.

This package's face is the one name the assignor imports; the functions live in its
modules, named for what they hold:

* ``quotas``: how many each member should hold (``targets``), how many it gives up
  (``revocation_counts``), per-connector counts (``count_groups``, ``spread_ok``, ``spread_of``);
* ``revoking``: which resources a member gives up (``pick_last``, ``pick_spread_tasks``);
* ``placing``: where free work goes (``allocate``);
* ``target``: a shape both balanced and spread (``spread_target``), whose remainders
  ``search`` places keeping the most tasks where they are (exactly, for small groups)
  and ``paths`` from the current holdings (for big ones).
"""

from __future__ import annotations

from kooper.core.balance.placing import GroupKey, allocate
from kooper.core.balance.quotas import (
    count_groups,
    revocation_counts,
    spread_of,
    spread_ok,
    targets,
    task_group,
)
from kooper.core.balance.revoking import pick_last, pick_spread_tasks
from kooper.core.balance.target import spread_target

__all__ = [
    "GroupKey",
    "allocate",
    "count_groups",
    "pick_last",
    "pick_spread_tasks",
    "revocation_counts",
    "spread_of",
    "spread_ok",
    "spread_target",
    "targets",
    "task_group",
]
