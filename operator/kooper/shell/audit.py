"""The audit log: one JSON line per assignment change, in the drill event-log schema.

The rows themselves (columns, ``change`` values, the ``until_ms`` and ``departure``
of ``lost`` rows) are built by the pure ``control.audit.rows``, re-exported here, so
the simulator's chaos checks judge the very rows the operator writes. ``AuditLog``
writes them to the ``kooper.audit`` logger and an optional file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import IO, Any

from kooper.control import audit as audit_rows

logger = logging.getLogger("kooper.audit")

rows = audit_rows.rows
departed = audit_rows.departed
"""Members that held an assignment last round and are gone (or restarted) now."""
revoked = audit_rows.revoked
"""Per member, what a round newly tells it to stop (the ``revoked`` rows)."""


class AuditLog:
    """Writes audit rows as JSON lines to the ``kooper.audit`` logger and an optional file."""

    def __init__(self, path: str | None = None) -> None:
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self.count = 0

    def write(self, rows_: Iterable[dict[str, Any]]) -> int:
        """Write rows; returns how many."""
        written = 0
        lines = []
        for row in rows_:
            line = json.dumps(row, separators=(",", ":"))
            lines.append(line)
            written += 1
        if not lines:
            return 0
        if logger.isEnabledFor(logging.INFO):
            for line in lines:
                logger.info(line)
        if self._file is not None:
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()
        self.count += written
        return written

    def close(self) -> None:
        """Close the file, if any."""
        if self._file is not None:
            self._file.close()
            self._file = None
