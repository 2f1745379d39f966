"""Run a kopf operator against an emulated cluster, in its own thread and event loop.

kopf must not share the emulator's loop (the operator would starve the
server it talks to, and vice versa), and tests want plain synchronous code,
so each side gets its own thread. The operator logs in to the emulator's
URL through a login handler added to the given registry; any login
handlers kopf would otherwise fall back to (kubeconfig, in-cluster) are
then skipped.
"""

import asyncio
import concurrent.futures
import threading
from types import TracebackType
from typing import Any, Self

import kopf


class OperatorThread:
    """`kopf.operator()` in a background thread, logged in to `url`."""

    def __init__(
        self,
        url: str,
        *,
        registry: kopf.OperatorRegistry,
        settings: kopf.OperatorSettings | None = None,
        namespaces: tuple[str, ...] = (),
        memo: Any = None,
    ) -> None:
        """Prepare the operator; `namespaces=()` means cluster-wide."""
        self.url = url
        self.registry = registry
        self.settings = settings if settings is not None else quiet_settings()
        self.namespaces = namespaces
        self.memo = memo
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.error: BaseException | None = None
        """What the operator died of, if it died."""

        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server=url, insecure=True, default_namespace="default")

        kopf.on.login(registry=registry, id="emulated-cluster")(login)

    def _run(self) -> None:
        try:
            asyncio.run(kopf.operator(
                registry=self.registry, settings=self.settings, standalone=True,
                clusterwide=not self.namespaces, namespaces=self.namespaces,
                ready_flag=self._ready, stop_flag=self._stop, memo=self.memo,
            ))
        except BaseException as exc:  # kept for the test to look at, not swallowed silently
            self.error = exc
            self._ready.set()

    def start(self, timeout: float = 10.0) -> None:
        """Start the operator and wait until kopf says it is ready."""
        self._thread = threading.Thread(target=self._run, name="kopf-operator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"kopf did not get ready in {timeout}s")
        if self.error is not None:
            raise RuntimeError("kopf failed to start") from self.error

    def stop(self, timeout: float = 10.0) -> None:
        """Ask kopf to stop and wait for its thread."""
        if not self._stop.done():
            self._stop.set_result(None)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"kopf did not stop in {timeout}s")
            self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def quiet_settings() -> kopf.OperatorSettings:
    """Settings that suit an emulated cluster: fast retries, no stuck watches at shutdown."""
    settings = kopf.OperatorSettings()
    settings.watching.server_timeout = 60
    settings.watching.client_timeout = 70
    settings.networking.error_backoffs = [0.1, 0.2, 0.5]
    settings.execution.max_workers = 4
    settings.persistence.finalizer = "kooper.dev/finalizer"
    return settings
