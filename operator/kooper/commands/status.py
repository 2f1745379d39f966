"""``kooper status <group>``: a WorkerGroup's members and what each runs, as a table.

Reads the WorkerGroup, its ConfigMaps (what each member may run) and the member
Leases (what each member reports it applied), through ``KOOPER_KUBE_API`` (the
embedded cluster), the in-cluster service account, or kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from kooper.core import errors, model
from kooper.protocol import codec, messages

HELP = "print a worker group's members and their resources"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kooper status``."""
    parser.add_argument("group", help="the WorkerGroup's name")
    parser.add_argument("-n", "--namespace", default="default", help="its namespace")
    parser.add_argument("--all", action="store_true",
                        help="list every resource of every member (default: the first 8)")


def _summary(resources: model.ConnectorsAndTasks, limit: int | None) -> str:
    names = resources.sorted()
    if limit is not None and len(names) > limit:
        return ", ".join(names[:limit]) + f", ... (+{len(names) - limit})"
    return ", ".join(names) or "-"


def render(group: Mapping[str, Any], configmaps: Iterable[Mapping[str, Any]],
           leases: Iterable[Mapping[str, Any]], *, limit: int | None = 8) -> str:
    """The table ``kooper status`` prints (pure)."""
    meta = group.get("metadata", {})
    status = group.get("status") or {}
    delay = status.get("delay") or {}
    lines = [
        f"WorkerGroup {meta.get('namespace')}/{meta.get('name')}: "
        f"generation {status.get('rebalanceGeneration', 0)}, "
        f"protocol {status.get('protocol', '?')}, "
        f"{(status.get('members') or {}).get('count', 0)} members, "
        f"{status.get('connectors', 0)} connectors, {status.get('tasks', 0)} tasks, "
        f"{status.get('unassigned', 0)} unassigned"
        + (f", delay {delay.get('remainingSeconds')}s ({delay.get('lost')} lost)"
           if delay else ""),
        "  ".join(f"{c.get('type')}={c.get('status')} ({c.get('reason')})"
                  for c in status.get("conditions") or ()),
    ]
    applied: dict[str, str] = {}
    for lease in leases:
        member = (lease.get("metadata", {}).get("labels") or {}).get("kooper.dev/member", "")
        text = (lease.get("metadata", {}).get("annotations") or {}).get(
            messages.REPORT_ANNOTATION)
        try:
            applied[member] = str(codec.decode_report(text).generation) if text else "-"
        except errors.RemoteProtocolError:
            applied[member] = "bad"
    rows = [("MEMBER", "GEN", "APPLIED", "CONN", "TASKS", "REVOKING", "RESOURCES")]
    for cm in sorted(configmaps, key=lambda c: c.get("metadata", {}).get("name", "")):
        member = (cm.get("metadata", {}).get("labels") or {}).get("kooper.dev/member", "?")
        text = (cm.get("data") or {}).get(messages.CONFIGMAP_KEY, "")
        try:
            doc = codec.decode_assignment(text)
        except errors.RemoteProtocolError:
            rows.append((member, "?", applied.get(member, "-"), "?", "?", "?", "unreadable"))
            continue
        rows.append((member, str(doc.generation), applied.get(member, "-"),
                     str(len(doc.assigned.connectors)), str(len(doc.assigned.tasks)),
                     str(len(doc.revoked)), _summary(doc.assigned, limit)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1]))
                     + "  " + row[-1])
    return "\n".join(lines)


async def _fetch(namespace: str, name: str) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                     list[dict[str, Any]]]:
    import kopf

    from kooper.shell import handlers, kube, settings

    client = kube.Client(handlers.connection_for(settings.from_env(), kopf.OperatorSettings()))
    try:
        try:
            group = await client.read_group(namespace, name)
        except kube.NotFoundError:
            raise errors.KooperError(
                f"WorkerGroup {name!r} not found in namespace {namespace!r}") from None
        configmaps = await client.list(f"/api/v1/namespaces/{namespace}/configmaps",
                                       label_selector=f"kooper.dev/group={name}")
        leases = await client.list(
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            label_selector="kooper.dev/member")
    finally:
        await client.close()
    return group, configmaps, leases


def run(args: argparse.Namespace) -> int:
    """Print the table."""
    group, configmaps, leases = asyncio.run(_fetch(args.namespace, args.group))
    print(render(group, configmaps, leases, limit=None if args.all else 8))
    return 0
