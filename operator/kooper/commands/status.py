"""``kooper status <group>``: a WorkerGroup's members and what each runs, as a table.

Reads the WorkerGroup, its ConfigMaps (what each member may run) and the member
Leases (what each member reports it applied), through ``--kubeconfig``/``--context``,
else ``KOOPER_KUBE_API`` (the embedded cluster), ``$KUBECONFIG``'s current context, the
in-cluster service account, or ``~/.kube/config``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from kooper.commands import options
from kooper.core import errors, model
from kooper.protocol import codec, messages
from kooper.sdk import apierrors

HELP = "print a worker group's members and their resources"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kooper status``."""
    parser.add_argument("group", help="the WorkerGroup's name")
    parser.add_argument("-n", "--namespace", default=None,
                        help="its namespace (default: the kubeconfig context's, else "
                             "the pod's, else default)")
    parser.add_argument("--all", action="store_true",
                        help="list every resource of every member (default: the first 8)")
    add_cluster_arguments(parser)
    options.add_output(parser)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--context``, shared with ``kooper run``."""
    parser.add_argument("--kubeconfig", metavar="PATH",
                        help="the kubeconfig file to read (default: $KUBECONFIG; else in a pod "
                             "its service account; else ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME",
                        help="kubeconfig context to use (default: the current context)")


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
        + (f", delay {delay.get('remainingSeconds')} s left ({delay.get('lost')} lost)"
           if delay else ""),
        "  ".join(f"{c.get('type')}={c.get('status')} ({c.get('reason')})"
                  for c in status.get("conditions") or ()),
    ]
    reports = _applied(leases)
    applied = {member: str(generation) for member, generation in reports.items()}
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
                     str(len(_revoking(doc, reports.get(member)))),
                     _summary(doc.assigned, limit)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1]))
                     + "  " + row[-1])
    return "\n".join(lines)


def document(group: Mapping[str, Any], configmaps: Iterable[Mapping[str, Any]],
             leases: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What ``-o json|yaml`` prints (pure): the group's status and every member's resources."""
    meta = group.get("metadata", {})
    status = group.get("status") or {}
    delay = status.get("delay") or {}
    applied = _applied(leases)
    members = []
    for cm in sorted(configmaps, key=lambda c: c.get("metadata", {}).get("name", "")):
        member = (cm.get("metadata", {}).get("labels") or {}).get("kooper.dev/member", "?")
        text = (cm.get("data") or {}).get(messages.CONFIGMAP_KEY, "")
        entry: dict[str, Any] = {"member": member, "applied_generation": applied.get(member)}
        try:
            doc = codec.decode_assignment(text)
        except errors.RemoteProtocolError as exc:
            entry["error"] = str(exc)
        else:
            entry.update(
                generation=doc.generation,
                connectors=sorted(doc.assigned.connectors, key=model.resource_sort_key),
                tasks=sorted(doc.assigned.tasks, key=model.resource_sort_key),
                revoking=sorted(_revoking(doc, applied.get(member)),
                                key=model.resource_sort_key),
            )
        members.append(entry)
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "generation": status.get("rebalanceGeneration", 0),
        "protocol": status.get("protocol"),
        "members": (status.get("members") or {}).get("count", 0),
        "connectors": status.get("connectors", 0),
        "tasks": status.get("tasks", 0),
        "unassigned": status.get("unassigned", 0),
        "delay": ({"remaining_ms": int(float(delay.get("remainingSeconds") or 0) * 1000),
                   "lost": delay.get("lost")} if delay else None),
        "conditions": [{"type": c.get("type"), "status": c.get("status"),
                        "reason": c.get("reason"), "message": c.get("message")}
                       for c in status.get("conditions") or ()],
        "assignments": members,
    }


def _revoking(doc: messages.Assignment, applied: int | str | None) -> list[str]:
    """What the member is still stopping: its document's ``revoked`` until it reports that
    generation. An acknowledged revocation stays in a document no round rewrote
    (docs/protocol.md, "A revocation the member acknowledged rewrites nobody"): it names
    work the member already stopped, not work in flight."""
    if isinstance(applied, int) and applied >= doc.generation:
        return []
    return [*doc.revoked.connectors, *doc.revoked.tasks]


def _applied(leases: Iterable[Mapping[str, Any]]) -> dict[str, int | str]:
    applied: dict[str, int | str] = {}
    for lease in leases:
        member = (lease.get("metadata", {}).get("labels") or {}).get("kooper.dev/member", "")
        text = (lease.get("metadata", {}).get("annotations") or {}).get(
            messages.REPORT_ANNOTATION)
        if not text:
            continue
        try:
            applied[member] = codec.decode_report(text).generation
        except errors.RemoteProtocolError:
            applied[member] = "bad"
    return applied


def api_error(exc: errors.KooperError, server: str) -> errors.KooperError:
    """One line for a failed API call: unreachable, too slow, or refused with a status."""
    import aiohttp

    cause = exc.__cause__
    if isinstance(cause, TimeoutError):
        return errors.KooperError(f"the Kubernetes API at {server} did not answer in time")
    if isinstance(cause, OSError | aiohttp.ClientError):
        return errors.KooperError(f"cannot reach the Kubernetes API at {server}: {cause}")
    hint = {401: "the credentials were rejected",
            403: "the credentials lack a permission (RBAC: the chart's operator role)",
            404: "are kooper's CRDs installed? (kubectl apply -f crds/)"}.get(
        getattr(exc, "status", None) or 0)
    return errors.KooperError(f"{server}: {exc}" + (f": {hint}" if hint else ""))


async def _fetch(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                     list[dict[str, Any]]]:
    from kooper.shell import credentials, kube, settings

    config = settings.from_env(kubeconfig=args.kubeconfig, context=args.context)
    if args.kubeconfig or args.context:
        config = dataclasses.replace(config, kube_api=None)  # the flags win over the env
    login = credentials.login(config)
    connection = login.connection
    namespace, name = args.namespace or connection.namespace or "default", args.group
    client = kube.Client(login)
    try:
        try:
            group = await client.read_group(namespace, name)
        except apierrors.NotFound:
            raise errors.KooperError(
                f"WorkerGroup {name!r} not found in namespace {namespace!r}") from None
        configmaps = await client.list(f"/api/v1/namespaces/{namespace}/configmaps",
                                       label_selector=f"kooper.dev/group={name}")
        leases = await client.list(
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            label_selector="kooper.dev/member")
    except apierrors.ApiError as exc:
        raise api_error(exc, connection.server) from None
    finally:
        await client.close()
    return group, configmaps, leases


def run(args: argparse.Namespace) -> int:
    """Print the table."""
    group, configmaps, leases = asyncio.run(_fetch(args))
    if args.output == "table":
        print(render(group, configmaps, leases, limit=None if args.all else 8))
    else:
        print(options.dump(document(group, configmaps, leases), args.output))
    return 0
