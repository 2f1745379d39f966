"""The workers' own rows on kind: one file per worker process on this host.

Member pods started by ``Demo`` on kind run ``kooper worker --events-dir`` on a hostPath
that every node mounts from one host directory (hack/kind/cluster.sh), so each process
appends its ``start``/``stop`` rows, stamped with its own clock (the host's: containers
share the kernel's), to ``<namespace>.<pod>.<pod uid>.<start ns>.jsonl``. The files
outlive pods, frozen and partitioned nodes, and the cluster: what ``chaos_log`` judges
them with is independent of the operator and of the API server.

A process that ends without stopping its work (a SIGKILL, or the SDK ending itself on
purpose after a freeze: exit 3) leaves its runs open. Its exit is bounded by the start
of the next container *of the same pod* (same uid): the kubelet starts a container only
once the one before it has exited. ``exits`` returns those bounds as ``exit`` process
rows. A process of a pod object that is gone has no such bound (a force-deleted pod's
process may outlive its successor under the same name): its open runs stay open.
"""

from __future__ import annotations

import codecs
import dataclasses
import datetime
import json
import pathlib

from e2e import chaos_log
from kooper.core import events


@dataclasses.dataclass(frozen=True, slots=True)
class Incarnation:
    """One worker process, named by its events file."""

    path: pathlib.Path
    pod: str
    uid: str
    started_ns: int

    @property
    def name(self) -> str:
        return f"{self.pod}.{self.started_ns}"

    @property
    def started_ms(self) -> int:
        return self.started_ns // 1_000_000


def incarnations(directory: pathlib.Path, namespace: str) -> list[Incarnation]:
    """Every process's file for ``namespace``, oldest first."""
    out = []
    for path in directory.glob(f"{namespace}.*.jsonl"):
        pod_and_uid, _, started = path.name.removesuffix(".jsonl").rpartition(".")
        pod, _, uid = pod_and_uid.removeprefix(f"{namespace}.").rpartition(".")
        out.append(Incarnation(path, pod, uid, int(started)))
    return sorted(out, key=lambda i: i.started_ns)


def read(directory: pathlib.Path, namespace: str) -> dict[str, list[events.Event]]:
    """incarnation -> the rows its process wrote, in the order it wrote them.

    Lines end at a newline only (JSON allows a lone CR or U+2028 inside a row). A file's
    last line may be cut short by a SIGKILL mid-write, and is then skipped; any other line
    that is not an event row raises ``ValueError`` naming the file and line (a row dropped
    there could be a start, and hide an overlap).
    """
    out: dict[str, list[events.Event]] = {}
    for incarnation in incarnations(directory, namespace):
        path = incarnation.path
        lines = [(number, raw) for number, raw
                 in enumerate(path.read_bytes().split(b"\n"), 1) if raw.strip()]
        if lines and lines[0][1].startswith(codecs.BOM_UTF8):
            raise ValueError(f"{path}:{lines[0][0]}: starts with a byte-order mark")
        rows = []
        for number, raw in lines:
            try:
                rows.append(events.Event.from_row(json.loads(raw.decode("utf-8"))))
            except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError too
                if number == lines[-1][0]:
                    continue  # the last line, cut short by a SIGKILL mid-write
                raise ValueError(f"{path}:{number}: {exc}") from None
        out[incarnation.name] = rows
    return out


def exits(directory: pathlib.Path, namespace: str) -> list[chaos_log.ProcessRow]:
    """An ``exit`` row for each process a later container of the same pod replaced, at
    that container's start (an upper bound of the exit, see the module docstring)."""
    last: dict[tuple[str, str], Incarnation] = {}
    out = []
    for incarnation in incarnations(directory, namespace):
        key = (incarnation.pod, incarnation.uid)
        before = last.get(key)
        if before is not None and incarnation.uid != "-":
            out.append(chaos_log.ProcessRow(-(-incarnation.started_ns // 1_000_000),
                                            before.name, before.pod, "exit"))
        last[key] = incarnation
    return out


def latest(directory: pathlib.Path, namespace: str, pods: list[str]) -> dict[str, str]:
    """pod -> its newest incarnation (the process running now, for a pod that runs)."""
    return {i.pod: i.name for i in incarnations(directory, namespace) if i.pod in pods}


def runs_since(directory: pathlib.Path, namespace: str, start_ms: int, current: set[str],
               processes: list[chaos_log.ProcessRow] | None = None) -> list[chaos_log.Run]:
    """The runs of the incarnations that ran at ``start_ms`` (``current``: ``latest`` then)
    or began later, their exits bounded (``exits``) and ``processes`` added."""
    rows = read(directory, namespace)
    wanted = {i: r for i, r in rows.items()
              if i in current or int(i.rsplit(".", 1)[1]) // 1_000_000 >= start_ms}
    return chaos_log.runs(wanted, [*(processes or []), *exits(directory, namespace)])


def rfc3339_ms(stamp: str) -> int:
    """``2026-11-27T09:20:01.123456789Z`` -> epoch milliseconds, rounded up: a runtime's
    ``finishedAt`` bounds an exit from above, and so must the row made of it."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    moment = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.UTC)
    nanos = int((fraction + "0" * 9)[:9])
    return int(moment.timestamp()) * 1000 + -(-nanos // 1_000_000)
