"""One pod's process as the simulator models it (``Pod``), and the protocol sets a
worker may speak."""

from __future__ import annotations

import dataclasses

from kooper.core import ids, model
from kooper.protocol import messages
from kooper.sdk import session as sdk_session


@dataclasses.dataclass
class Pod:
    """One pod's process, as the simulator models it."""

    name: ids.WorkerId
    ordinal: int
    token: int
    incarnation: str
    protocols: frozenset[model.Protocol]
    running: set[str] = dataclasses.field(default_factory=set)
    generation: int = -1
    latest: messages.Assignment | None = None
    busy: bool = False
    alive: bool = True
    partitioned: bool = False
    fenced: bool = False
    report_seq: int = 0
    partitions: int = 0
    started_at: int = -1
    session: sdk_session.Session | None = None


ALL = frozenset(model.Protocol)
EAGER_ONLY = frozenset({model.Protocol.EAGER})
