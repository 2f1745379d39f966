"""``kooper run``: the operator (kopf) against a Kubernetes cluster.

Credentials: ``--kubeconfig``/``--context``; else ``KOOPER_KUBE_API`` (an
unauthenticated URL, e.g. the embedded cluster), ``$KUBECONFIG``'s current context,
the in-cluster service account, or ``~/.kube/config``'s (controller-runtime's order).
They are checked before kopf starts: without any, the command fails at once with one
line instead of retrying forever.
Default ports are the chart's (charts/kooper/values.yaml): metrics 9090,
probes 8080 (``/healthz`` liveness, ``/readyz`` readiness).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import pathlib
from typing import TYPE_CHECKING

from kooper.commands import options, status
from kooper.core import errors
from kooper.shell import settings

if TYPE_CHECKING:
    from kooper.shell.login import Login

HELP = "run the operator against a Kubernetes cluster"

METRICS_PORT = 9090
"""The chart's ``metrics.port``."""
HEALTH_PORT = 8080
"""The chart's ``operator.healthPort``."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kooper run``."""
    parser.add_argument("-n", "--namespace", action="append", default=[],
                        help="serve this namespace (repeatable; kopf glob patterns); "
                             "default: cluster-wide")
    status.add_cluster_arguments(parser)
    parser.add_argument("--metrics-port", type=options.port, default=METRICS_PORT,
                        metavar="PORT",
                        help=f"Prometheus /metrics port (0: off; default {METRICS_PORT}, "
                             f"as in the chart)")
    parser.add_argument("--health-port", type=options.port, default=HEALTH_PORT,
                        metavar="PORT",
                        help=f"port of /healthz (liveness) and /readyz (readiness) "
                             f"(0: off; default {HEALTH_PORT}, as in the chart)")
    parser.add_argument("--audit-log", metavar="PATH",
                        help="append the audit log (JSON lines, event-log schema) to PATH")
    parser.add_argument("--peering", metavar="NAME",
                        help="kopf peering name: only the highest-priority replica is active "
                             "(needs the KopfPeering CRDs); default: standalone")
    parser.add_argument("--priority", type=int, default=0,
                        help="kopf peering priority of this replica (default 0)")
    parser.add_argument("--leader-election", action=argparse.BooleanOptionalAction,
                        default=False,
                        help="run rounds only while holding the --leader-lease Lease "
                             "in --leader-namespace; other replicas stand by (default off)")
    parser.add_argument("--leader-namespace", metavar="NAMESPACE",
                        default=os.environ.get("POD_NAMESPACE") or "default",
                        help="namespace of the leader Lease (default $POD_NAMESPACE, "
                             "else default)")
    parser.add_argument("--leader-lease", metavar="NAME",
                        default=settings.LEADER_LEASE,
                        help=f"name of the leader Lease: one per operator installation "
                             f"(the chart passes <release>-kooper-operator-leader; "
                             f"default {settings.LEADER_LEASE})")
    parser.add_argument("--owner", metavar="DEPLOYMENT", default="",
                        help="this operator's Deployment in --leader-namespace: it owns the "
                             "leader Lease and a --peering KopfPeering in its namespace, so "
                             "deleting it (helm uninstall) deletes them too (the chart passes "
                             "its own; default: no owner)")
    parser.add_argument("--identity",
                        help="this replica's identity, written into every assignment "
                             "(default host/pid)")
    parser.add_argument("--debounce", type=options.non_negative_float, default=0.05,
                        metavar="SECONDS",
                        help="seconds a round waits to coalesce a burst of events "
                             "(default 0.05)")
    parser.add_argument("--gc-freeze", action=argparse.BooleanOptionalAction, default=True,
                        help="once every group has planned and the operator is quiet, "
                             "gc.freeze() the startup heap out of the garbage collector's "
                             "full scans (once per process; default on)")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="debug logging (default: info, without kopf's per-event lines)")


def run(args: argparse.Namespace) -> int:
    """Check the flags and the credentials, then run until interrupted."""
    from kooper.shell import credentials, metrics

    if args.metrics_port and args.metrics_port == args.health_port:
        raise errors.KooperError(
            f"--metrics-port and --health-port are both {args.metrics_port}; use two ports")
    if args.audit_log:
        options.writable_file(pathlib.Path(args.audit_log), "--audit-log")
    config = settings.from_env(
        namespaces=tuple(args.namespace), metrics_port=args.metrics_port,
        health_port=args.health_port, audit_log=args.audit_log, peering=args.peering,
        priority=args.priority, identity=args.identity, debounce_s=args.debounce,
        gc_freeze=args.gc_freeze, kubeconfig=args.kubeconfig, context=args.context,
        leader_election=args.leader_election, leader_namespace=args.leader_namespace,
        leader_lease=args.leader_lease, owner=args.owner,
    )
    if args.kubeconfig or args.context:
        config = dataclasses.replace(config, kube_api=None)  # the flags win over the env
    # Fail fast: kopf would log a traceback and retry a failed login every minute.
    login = credentials.login(config, on_login=metrics.count_login)
    connection = login.connection
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if not args.verbose:
        # kopf logs every handled watch event at INFO: one line per Lease renewal.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    asyncio.run(_preflight(login, config.namespaces))
    logging.getLogger("kooper").info("API %s; probes on %s, metrics on %s", connection.server,
                                     config.health_port or "off", config.metrics_port or "off")
    asyncio.run(_operate(config, login))
    return 0


async def _preflight(login: Login, namespaces: tuple[str, ...]) -> None:
    """List one WorkerGroup where the operator will watch: the API answers, the credentials
    are accepted, RBAC allows it and the CRDs exist; else one line, before kopf starts."""
    from kooper.control import views
    from kooper.sdk import apierrors
    from kooper.shell import kube

    plain = [ns for ns in namespaces if not settings.NAMESPACE_PATTERN & set(ns)]
    where = f"/namespaces/{plain[0]}" if plain else ""
    client = kube.Client(login)
    try:
        await client.request("GET", f"/apis/{views.GROUP}/{views.VERSION}{where}/workergroups",
                             params={"limit": "1"})
    except apierrors.ApiError as exc:
        raise status.api_error(exc, login.connection.server) from None
    finally:
        await client.close()


async def _operate(config: settings.Config, login: Login) -> None:
    import kopf

    from kooper.shell import controller, handlers, probes

    registry = kopf.OperatorRegistry()
    handlers.register(registry)
    memo = handlers.make_memo(config, login)
    shell = memo["shell"]
    assert isinstance(shell, controller.Shell)
    server = await probes.serve(shell, port=config.health_port) if config.health_port else None
    try:
        await kopf.operator(
            registry=registry,
            memo=memo,
            clusterwide=not config.namespaces,
            namespaces=config.namespaces,
            standalone=not config.peering,
            priority=config.priority,
            peering_name=config.peering,
        )
    finally:
        if server is not None:
            await server.cleanup()
