"""The drill recorder: one event log per run from the pods' and the operator's rows.

Workers write ``start``/``stop`` rows (what really ran, where, when), and the pod
runner writes each process's ``join`` (it starts) and ``leave`` (it was reaped) into
the same file (``demo.pods``); the operator's audit log adds only ``round``. Its
``join``/``leave`` rows say when the operator *thought* a member came or went, and its
``start``/``stop`` rows are its *intent*: a ``leave`` the operator declared while the
process ran on would end that process's runs early and hide a double run, so none of
them count. Rows are re-labelled with the run's name, group, protocol and policy,
sorted by time, and written as JSON lines.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Iterable

from kooper.core import events

OPERATOR_KINDS = frozenset({events.Kind.ROUND})
WORKER_KINDS = frozenset({events.Kind.START, events.Kind.STOP})
POD_KINDS = WORKER_KINDS | {events.Kind.JOIN, events.Kind.LEAVE}
"""What a process's events file holds: its worker's rows and the runner's."""


def read_rows(path: pathlib.Path) -> list[events.Event]:
    """The event rows of a JSON-lines file; lines that are not event rows are skipped.

    Worker stdout may mix log lines with rows, and a killed process may leave a
    torn last line, so anything unparsable is ignored rather than fatal.
    """
    rows: list[events.Event] = []
    if not path.exists():
        return rows
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
            if isinstance(data, dict) and "event" in data and "ts_ms" in data:
                rows.append(events.Event.from_row(data))
        except ValueError:
            continue
    return rows


def collect(*, worker_files: Iterable[pathlib.Path], audit_file: pathlib.Path | None,
            run: str, group: str, protocol: str, policy: str) -> list[events.Event]:
    """Merge the pods' rows and the operator's rounds into one time-ordered log for ``run``."""
    merged: list[events.Event] = []
    for path in worker_files:
        merged.extend(row for row in read_rows(path) if row.event in POD_KINDS)
    if audit_file is not None:
        merged.extend(row for row in read_rows(audit_file) if row.event in OPERATOR_KINDS)
    merged = [dataclasses.replace(row, run=run, group=group,
                                  protocol=row.protocol or protocol, policy=policy)
              for row in merged]
    order = {events.Kind.STOP: 0, events.Kind.LEAVE: 1, events.Kind.ROUND: 2,
             events.Kind.JOIN: 3, events.Kind.START: 4}
    merged.sort(key=lambda row: (row.ts_ms, order[row.event]))
    return merged


def write(rows: Iterable[events.Event], path: pathlib.Path) -> pathlib.Path:
    """Write the log as JSON lines; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.writelines(events.dump_lines(rows))
    return path
