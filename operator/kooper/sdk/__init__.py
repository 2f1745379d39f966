"""The worker SDK: join a kooper worker group and run what the operator assigns.

Standard library only (no kopf, no prometheus_client, no pyspark), so a worker
image installs ``kooper`` and nothing else. A worker is three callbacks::

    from kooper import sdk

    def on_assigned(resource, config, epoch): ...   # start; fence writes with epoch
    def on_revoked(resource): ...                   # stop and commit progress
    def on_lost(resource): ...                      # stop, do NOT commit: it may run elsewhere

    worker = sdk.Worker(
        api=sdk.Api.from_env(), identity=sdk.identity_from_env(),
        on_assigned=on_assigned, on_revoked=on_revoked, on_lost=on_lost,
        on_paused=..., on_resumed=...,              # optional: hold a paused connector's work
    )
    worker.run(stop_event)        # returns after stop_event is set and the member left

``docs/sdk.md`` explains the guarantees behind each callback.

``sdk.health.serve`` answers the probes and ``/metrics`` (``worker.metrics.render``).

``Session`` is the sans-I/O core underneath, for other transports and simulators.
"""

from kooper.sdk import health, metrics
from kooper.sdk.client import STUCK_EXIT_CODE, OnAssigned, OnStopped, Worker, WorkerStuckError
from kooper.sdk.identity import Identity, IdentityError
from kooper.sdk.identity import from_env as identity_from_env
from kooper.sdk.kube import Api, ApiError, NoCredentialsError
from kooper.sdk.session import (
    Action,
    Exit,
    Pause,
    ReleaseLease,
    Resume,
    Session,
    Start,
    Stop,
    WriteReport,
)
from kooper.sdk.settings import Settings

__all__ = [
    "STUCK_EXIT_CODE",
    "Action",
    "Api",
    "ApiError",
    "Exit",
    "Identity",
    "IdentityError",
    "NoCredentialsError",
    "OnAssigned",
    "OnStopped",
    "Pause",
    "ReleaseLease",
    "Resume",
    "Session",
    "Settings",
    "Start",
    "Stop",
    "Worker",
    "WorkerStuckError",
    "WriteReport",
    "health",
    "identity_from_env",
    "metrics",
]
