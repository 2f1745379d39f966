"""``kooper run``: the operator (kopf) against the current Kubernetes context.

Credentials: ``KOOPER_KUBE_API`` (an unauthenticated URL, e.g. the embedded
cluster), else the in-cluster service account, else kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

HELP = "run the operator (kopf) against the current Kubernetes context"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kooper run``."""
    parser.add_argument("-n", "--namespace", action="append", default=[],
                        help="serve this namespace (repeatable; kopf glob patterns); "
                             "default: cluster-wide")
    parser.add_argument("--metrics-port", type=int, default=8080,
                        help="Prometheus /metrics port (0: off; default 8080)")
    parser.add_argument("--health-port", type=int, default=8081,
                        help="liveness/readiness /healthz port (0: off; default 8081)")
    parser.add_argument("--audit-log", metavar="PATH",
                        help="append the audit log (JSON lines, event-log schema) to PATH")
    parser.add_argument("--peering", metavar="NAME",
                        help="kopf peering name: only the highest-priority replica is active "
                             "(needs the KopfPeering CRDs); default: standalone")
    parser.add_argument("--priority", type=int, default=0, help="kopf peering priority")
    parser.add_argument("--identity", help="this replica's identity (default host/pid)")
    parser.add_argument("--debounce", type=float, default=0.05,
                        help="seconds a round waits to coalesce a burst of events")
    parser.add_argument("--gc-freeze", action=argparse.BooleanOptionalAction, default=True,
                        help="once every group has planned and the operator is quiet, "
                             "gc.freeze() the startup heap out of the garbage collector's "
                             "full scans (once per process; default on)")
    parser.add_argument("--verbose", "-v", action="store_true", help="debug logging")


def run(args: argparse.Namespace) -> int:
    """Run until interrupted."""
    import kopf

    from kooper.shell import handlers, settings

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if not args.verbose:
        # kopf logs every handled watch event at INFO: one line per Lease renewal.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    config = settings.from_env(
        namespaces=tuple(args.namespace), metrics_port=args.metrics_port,
        health_port=args.health_port, audit_log=args.audit_log, peering=args.peering,
        priority=args.priority, identity=args.identity, debounce_s=args.debounce,
        gc_freeze=args.gc_freeze,
    )
    registry = kopf.OperatorRegistry()
    handlers.register(registry)
    liveness = (f"http://0.0.0.0:{config.health_port}/healthz" if config.health_port else None)
    asyncio.run(kopf.operator(
        registry=registry,
        memo=handlers.make_memo(config),
        clusterwide=not config.namespaces,
        namespaces=config.namespaces,
        standalone=not config.peering,
        priority=config.priority,
        peering_name=config.peering,
        liveness_endpoint=liveness,
    ))
    return 0
