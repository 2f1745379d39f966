"""The workers' own rows on kind: one file per worker process on this host.

Member pods started by ``Demo`` on kind run ``kooper worker --events-dir`` on a hostPath
that every node mounts from one host directory (hack/kind/cluster.sh), so each process
appends its ``start``/``stop`` rows, stamped with its own clock (the host's: containers
share the kernel's), to ``<namespace>.<pod>.<start ns>.jsonl``. The files outlive pods,
frozen and partitioned nodes, and the cluster: what ``chaos_log`` judges them with is
independent of the operator and of the API server.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence

from kooper.core import events


def incarnation(path: pathlib.Path) -> tuple[str, str]:
    """(pod, incarnation) named by an events file."""
    _namespace, pod, started = path.name.removesuffix(".jsonl").rsplit(".", 2)
    return pod, f"{pod}.{started}"


def read(directory: pathlib.Path, namespace: str) -> dict[str, list[events.Event]]:
    """incarnation -> the rows its process wrote, in the order it wrote them."""
    out: dict[str, list[events.Event]] = {}
    for path in sorted(directory.glob(f"{namespace}.*.jsonl")):
        rows = []
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    rows.append(events.Event.from_row(json.loads(line)))
                except ValueError:
                    continue  # a line cut short by a SIGKILL mid-write
        out[incarnation(path)[1]] = rows
    return out


def latest(directory: pathlib.Path, namespace: str, pods: Sequence[str]) -> dict[str, str]:
    """pod -> its newest incarnation (the process running now, for a pod that runs)."""
    newest: dict[str, tuple[int, str]] = {}
    for path in directory.glob(f"{namespace}.*.jsonl"):
        pod, name = incarnation(path)
        started = int(name.rsplit(".", 1)[1])
        if pod in pods and started > newest.get(pod, (-1, ""))[0]:
            newest[pod] = (started, name)
    return {pod: name for pod, (_, name) in newest.items()}
