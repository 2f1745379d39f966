"""``kooper worker --demo``: a worker pod running the demo connectors through the SDK.

Identity from the Downward API (``POD_NAME``, ``POD_NAMESPACE``, ``POD_UID``);
the API from ``KOOPER_KUBE_API`` or the in-cluster service account. One JSON
line per start, stop, pause and resume (the drill event log,
``kooper.core.events``) goes to stdout and, with ``--events-file``, to that file;
logs go to stderr. SIGTERM
stops every resource, reports owning nothing, deletes the Lease and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from typing import IO

from kooper.commands import options
from kooper.core import errors, events, model
from kooper.sdk import client, demo, health, identity, kube

HELP = "run a worker: the SDK with the demo connectors"


class WorkerUsageError(errors.KooperError):
    """Bad worker flags."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The worker's flags."""
    parser.add_argument(
        "--demo", action="store_true", help="run the built-in demo connector types (required)"
    )
    parser.add_argument(
        "--protocols",
        default="compatible,eager",
        help="protocols to advertise, comma-separated; 'eager' alone models an old worker",
    )
    parser.add_argument("--start-latency", type=options.duration, default=0, metavar="DURATION",
                        help="how long a demo connector takes to start (default 0s)")
    parser.add_argument("--stop-latency", type=options.duration, default=0, metavar="DURATION",
                        help="how long a demo connector takes to stop (default 0s)")
    parser.add_argument("--lease-duration", type=options.whole_seconds, default=30,
                        metavar="DURATION",
                        help="the member Lease's leaseDurationSeconds (default 30s)")
    parser.add_argument("--renew-interval", type=options.positive_duration, default=10_000,
                        metavar="DURATION", help="how often the Lease is renewed (default 10s)")
    parser.add_argument(
        "--tick-interval", type=options.positive_duration, default=500, metavar="DURATION",
        help="how often the idle main loop wakes (self-fencing check); assignments are "
             "watched (default 500ms)",
    )
    parser.add_argument(
        "--resync-period", type=options.positive_duration, default=30_000, metavar="DURATION",
        help="safety net under the watch: re-read the assignment this often (default 30s)",
    )
    parser.add_argument(
        "--callback-timeout", type=options.positive_duration, default=30_000,
        metavar="DURATION",
        help="longest a start/stop callback may take before it is reported failed "
             "(default 30s)",
    )
    parser.add_argument(
        "--stop-timeout", type=options.positive_duration, default=None, metavar="DURATION",
        help="longest a stop may take; a stop still running past it ends the process "
        "(default: a third of --lease-duration)",
    )
    parser.add_argument(
        "--fence-margin", type=options.positive_duration, default=None, metavar="DURATION",
        help="everything is stopped this long before the Lease could expire "
        "(default: a fifteenth of --lease-duration)",
    )
    parser.add_argument("--events-file", help="also append event JSON lines to this file")
    parser.add_argument(
        "--events-dir",
        help="also write event JSON lines to a file of this process's own in this directory "
        "(<namespace>.<pod>.<uid>.<start time ns>.jsonl: one per incarnation, e.g. on a hostPath "
        "that outlives the pod)",
    )
    parser.add_argument(
        "--health-port", type=int, default=0,
        help="serve /healthz, /readyz and /metrics here (0: off)",
    )
    parser.add_argument(
        "--run", default=os.environ.get("KOOPER_RUN", ""), help="run id for the event log"
    )
    parser.add_argument("--log-level", default="INFO", type=str.upper,
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="stderr log level (default INFO)")


def parse_protocols(text: str) -> frozenset[model.Protocol]:
    """``"compatible,eager"`` -> the set; unknown names are a usage error."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    try:
        protocols = frozenset(model.Protocol(name) for name in names)
    except ValueError:
        raise WorkerUsageError(
            f"--protocols {text!r}: expected names from {[str(p) for p in model.Protocol]}"
        ) from None
    if not protocols:
        raise WorkerUsageError("--protocols: at least one protocol")
    return protocols


def settings_from(args: argparse.Namespace) -> client.Settings:
    """The SDK settings the flags ask for, checked."""
    if args.renew_interval >= args.lease_duration * 1000:
        raise WorkerUsageError("--renew-interval must be shorter than --lease-duration")
    return client.Settings(
        lease_duration_s=args.lease_duration,
        renew_interval_s=args.renew_interval / 1000,
        tick_interval_s=args.tick_interval / 1000,
        resync_interval_s=args.resync_period / 1000,
        callback_timeout_s=args.callback_timeout / 1000,
        protocols=parse_protocols(args.protocols),
        stop_timeout_s=None if args.stop_timeout is None else args.stop_timeout / 1000,
        fence_margin_s=None if args.fence_margin is None else args.fence_margin / 1000,
    )


class EventSink:
    """Writes each event as one JSON line to stdout and the events file (thread-safe)."""

    def __init__(self, files: list[IO[str]]) -> None:
        self._files = files
        self._lock = threading.Lock()

    def __call__(self, event: events.Event) -> None:
        line = event.to_json() + "\n"
        with self._lock:
            for out in self._files:
                out.write(line)
                out.flush()


def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT."""
    if not args.demo:
        raise WorkerUsageError(
            "only the demo connectors are built in: pass --demo, or write a worker with kooper.sdk"
        )
    settings = settings_from(args)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    who = identity.from_env()
    api = kube.Api.from_env()
    connectors = demo.DemoConnectors(start_ms=args.start_latency, stop_ms=args.stop_latency)
    files = [open(path, "a", encoding="utf-8")  # noqa: SIM115
             for path in (args.events_file, incarnation_file(args.events_dir, who))
             if path]
    try:
        sink = EventSink([sys.stdout, *files])
        worker = client.Worker(
            api=api,
            identity=who,
            on_assigned=connectors.on_assigned,
            on_revoked=connectors.on_revoked,
            on_lost=connectors.on_lost,
            on_paused=connectors.on_paused,
            on_resumed=connectors.on_resumed,
            settings=settings,
            on_event=sink,
            run_id=args.run,
        )
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        server = None
        if args.health_port:
            server = health.serve(
                port=args.health_port, live=lambda: worker.live, ready=lambda: worker.ready,
                metrics=worker.metrics.render,
            )
        try:
            worker.run(stop)
        finally:
            if server is not None:
                server.shutdown()
    finally:
        for file in files:
            file.close()
    return 0


def incarnation_file(directory: str | None, who: identity.Identity) -> str | None:
    """This process's own events file in ``directory``:
    ``<namespace>.<pod>.<pod uid or "-">.<start time ns>.jsonl`` (None without one)."""
    if not directory:
        return None
    name = f"{who.namespace}.{who.pod}.{who.uid or '-'}.{time.time_ns()}.jsonl"
    return os.path.join(directory, name)
