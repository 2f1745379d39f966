"""One Connector that cannot be assigned fails alone (pure).

A member's assignment carries the config of every connector it runs, and must fit
one ConfigMap (``messages.MAX_ASSIGNMENT_BYTES``). Admission bounds each config
(64 KiB), but enough large connectors on one member still overflow it, and a config
that got past an older CRD can be anything. Before, the encoder raised, the round
failed and was retried forever: the whole group froze. Now ``step`` checks the
documents it is about to write; when one is over the budget it *rejects* the
largest connector in it (the largest config, then the last name), plans again
without it, and repeats until every document fits. A rejected connector is left
unassigned with ``Ready=False``/``Degraded=True`` (reason ``Rejected``), a
``ConnectorRejected`` Warning Event and ``kooper_rejected_resources``; the rest of
the group keeps rebalancing. It is tried again when its spec changes or the group's
members change (more members may spread the load).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kooper.control import views
from kooper.core import errors
from kooper.protocol import codec, messages

Rejected = Mapping[str, tuple[object, str]]
"""connector → (what it was rejected for: spec generation and members, the reason)."""

_CHEAP = messages.MAX_ASSIGNMENT_BYTES // 2
"""Documents whose configs and resources are estimated under this are not encoded here."""


def config_size(config: Mapping[str, str]) -> int:
    """Characters of a config as the document carries it (keys, values, quoting)."""
    return sum(len(k) + len(v) + 6 for k, v in config.items()) + 2


def reason_key(connector: views.ConnectorView, members: frozenset[str]) -> object:
    """What a rejection holds for: the same spec generation and the same members."""
    return (connector.generation, members)


def carried(rejected: Rejected, connectors: Sequence[views.ConnectorView],
            members: frozenset[str]) -> dict[str, tuple[object, str]]:
    """The rejections that still hold (spec and members unchanged)."""
    if not rejected:
        return {}
    by_name = {c.name: c for c in connectors}
    return {name: (key, why) for name, (key, why) in rejected.items()
            if name in by_name and key == reason_key(by_name[name], members)}


def oversized(writes: Sequence[messages.Assignment]) -> tuple[str, str] | None:
    """(connector to reject, why) when some document is over the budget, else None."""
    sizes: dict[int, int] = {}  # by id: the documents of a round share their configs

    def size(config: Mapping[str, str]) -> int:
        found = sizes.get(id(config))
        if found is None:
            found = sizes[id(config)] = config_size(config)
        return found

    for message in writes:
        estimate = sum(map(size, message.configs.values())) + 40 * (
            len(message.assigned.tasks) + len(message.assigned.connectors)
            + len(message.revoked.tasks) + len(message.revoked.connectors))
        if estimate < _CHEAP:
            continue
        try:
            codec.encode_assignment(message)
        except errors.LocalProtocolError as exc:
            if not message.configs:
                return None
            name = max(message.configs, key=lambda n: (config_size(message.configs[n]), n))
            return name, (f"{exc}; connector {name} (config of "
                          f"{config_size(message.configs[name])} characters, the largest "
                          f"there) is left unassigned so that the rest of the group fits")
    return None
