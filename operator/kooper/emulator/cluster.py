"""`EmulatedCluster`: the emulator on a real port, in a thread of its own.

The server runs in a background thread with its own event loop, so a kopf
operator (in another thread and loop) and worker processes (over plain HTTP)
can all talk to it, and tests can keep writing synchronous code. The
cluster object also gives tests and the demo direct, thread-safe access to
the store (no HTTP, no faults) and the fault-injection switches.

    with EmulatedCluster() as cluster:          # or: url = cluster.start() ... cluster.stop()
        cluster.create("configmaps", {"metadata": {"name": "x"}}, namespace="default")
        urllib.request.urlopen(cluster.url + "/api/v1/namespaces/default/configmaps")
"""

import asyncio
import copy
import pathlib
import threading
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self

import aiohttp.web

from kooper.emulator import errors, faults, resources, selectors, server, store, watching

ResourceRef = str | resources.ResourceSpec
"""A kind: "kooper.dev/v1alpha1/workergroups", "v1/pods", "pods", "Pod", "wg", or a spec."""

DEFAULT_NAMESPACES = ("default", "kube-system")


class EmulatedCluster:
    """An in-process Kubernetes API emulator served over HTTP on 127.0.0.1."""

    def __init__(
        self,
        *,
        crds: Iterable[pathlib.Path | str] = (),
        extra_resources: Iterable[resources.ResourceSpec] = (),
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        host: str = "127.0.0.1",
        port: int = 0,
        request_log_limit: int = 1000,
        history_limit: int = 20_000,
        event_limit: int = 1_000,
    ) -> None:
        """Prepare a cluster; nothing listens until `start()`.

        `crds` are CRD YAML files (e.g. the project's crds/*.yaml); without any,
        the kooper.dev kinds come from the CRD contract (`resources.KOOPER_CRDS`).
        `request_log_limit` bounds kmock's request log, `history_limit` the
        changes kept for watch resumption, `event_limit` the stored Events.
        """
        specs = [*resources.BUILTINS]
        loaded = resources.load_crds(crds)
        specs.extend(loaded or resources.KOOPER_CRDS)
        specs.extend(extra_resources)
        self.registry = resources.Registry(specs)
        self.store = store.Store(self.registry, history_limit=history_limit,
                                 event_limit=event_limit)
        self.hub = watching.WatchHub()
        self.faults = faults.Faults()
        self._request_log_limit = request_log_limit
        self.handler = self._new_handler()
        self._served_once = False
        self._host = host
        self._port = port
        self._url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: aiohttp.web.ServerRunner | None = None
        for namespace in namespaces:
            self.store.create(self.resolve("v1/namespaces"), {"metadata": {"name": namespace}})

    def _new_handler(self) -> server.ApiHandler:
        return server.ApiHandler(registry=self.registry, objects=self.store, hub=self.hub,
                                 faults=self.faults, request_log_limit=self._request_log_limit)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL, e.g. "http://127.0.0.1:40123"; raises if not started."""
        if self._url is None:
            raise RuntimeError("the emulated cluster is not started")
        return self._url

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The server's event loop (for advanced tests that feed kmock DSL reactions)."""
        if self._loop is None:
            raise RuntimeError("the emulated cluster is not started")
        return self._loop

    def start(self, timeout: float = 10.0) -> str:
        """Start serving in a background thread; returns the base URL."""
        if self._thread is not None:
            return self.url
        if self._served_once:
            # kmock's handler is bound to the loop it first ran in: a restart needs a new
            # one (objects, kinds and faults are kept; kmock DSL reactions are not).
            self.handler = self._new_handler()
        self._served_once = True
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="kooper-emulator", daemon=True)
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self._url = future.result(timeout)
        return self._url

    async def _serve(self) -> str:
        await self.handler.__aenter__()  # kmock renders Status errors only when entered
        web_server = aiohttp.web.Server(self.handler, handler_cancellation=True)
        self._runner = aiohttp.web.ServerRunner(web_server, shutdown_timeout=2.0)
        await self._runner.setup()
        site = aiohttp.web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        sockets = self._runner.addresses
        host, port = sockets[0][:2]
        return f"http://{host}:{port}"

    async def _shutdown(self) -> None:
        self.hub.drop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.handler.__aexit__(None, None, None)

    def stop(self, timeout: float = 10.0) -> None:
        """Close watches, stop the server and its thread; safe to call twice."""
        if self._loop is None or self._thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            self._loop.close()
            self._loop = self._thread = self._runner = None
            self._url = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- kinds ---------------------------------------------------------------------------

    def resolve(self, ref: ResourceRef) -> resources.ResourceSpec:
        """The served kind for a reference; raises LookupError if unknown or ambiguous."""
        return self.registry.resolve(ref)

    def register(self, spec: resources.ResourceSpec) -> None:
        """Serve one more kind (also in API discovery), even while running."""
        self.registry.add(spec)
        self.handler.declare(spec)

    def register_crds(self, paths: Iterable[pathlib.Path | str]) -> list[resources.ResourceSpec]:
        """Serve the kinds defined in CRD YAML files; returns them."""
        specs = resources.load_crds(paths)
        for spec in specs:
            self.register(spec)
        return specs

    # -- direct store access (thread-safe, no HTTP, never faulted) --------------------------

    def create(self, ref: ResourceRef, body: Mapping[str, Any], *,
               namespace: str | None = None) -> dict[str, Any]:
        """Create an object, as a POST would; returns a copy of the stored object."""
        return copy.deepcopy(self.store.create(self.resolve(ref), body, namespace))

    def get(self, ref: ResourceRef, name: str, *, namespace: str | None = None
            ) -> dict[str, Any] | None:
        """A copy of an object, or None if it does not exist."""
        try:
            return copy.deepcopy(self.store.get(self.resolve(ref), namespace or "", name))
        except errors.StatusFailure:
            return None

    def list(self, ref: ResourceRef, *, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None
             ) -> list[dict[str, Any]]:
        """Copies of the matching objects (every namespace when `namespace` is None)."""
        items, _ = self.store.list(self.resolve(ref), namespace,
                                   selectors.parse_labels(label_selector),
                                   selectors.parse_fields(field_selector))
        return copy.deepcopy(items)

    def patch(self, ref: ResourceRef, name: str, patch: Any, *, namespace: str | None = None,
              subresource: str | None = None,
              content_type: str = "application/merge-patch+json") -> dict[str, Any]:
        """Patch an object (merge patch by default; `subresource="status"` for status)."""
        return copy.deepcopy(self.store.patch(self.resolve(ref), namespace or "", name, patch,
                                              content_type=content_type,
                                              subresource=subresource))

    def replace(self, ref: ResourceRef, name: str, body: Mapping[str, Any], *,
                namespace: str | None = None, subresource: str | None = None
                ) -> dict[str, Any]:
        """Replace an object, as a PUT would."""
        return copy.deepcopy(self.store.replace(self.resolve(ref), namespace or "", name, body,
                                                subresource))

    def delete(self, ref: ResourceRef, name: str, *, namespace: str | None = None,
               propagation: str = "Background") -> dict[str, Any] | None:
        """Delete an object (with finalizers it is only marked); None if it did not exist."""
        try:
            return copy.deepcopy(self.store.delete(self.resolve(ref), namespace or "", name,
                                                   propagation=propagation))
        except errors.StatusFailure as exc:
            if exc.code == 404:
                return None
            raise

    @property
    def resource_version(self) -> int:
        """The global resourceVersion counter (the latest one handed out)."""
        return self.store.resource_version

    # -- faults and introspection ------------------------------------------------------------

    def fail_next_writes(self, ref: ResourceRef | None, count: int, *, code: int = 409,
                         verbs: Iterable[str] = faults.WRITE_VERBS) -> None:
        """Answer the next `count` HTTP writes to a kind (None: any) with `code`: a 409 storm."""
        key = "*" if ref is None else self.resolve(ref).key
        self.faults.fail_next(key, count, code=code, verbs=frozenset(verbs))

    def pending_failures(self, ref: ResourceRef | None = None) -> int:
        """Injected failures not yet served."""
        return self.faults.pending_failures("*" if ref is None else self.resolve(ref).key)

    def drop_watches(self, ref: ResourceRef | None = None) -> int:
        """End every open watch stream (of one kind, or all); returns how many."""
        return self.hub.drop(None if ref is None else self.resolve(ref))

    def silence_watches(self, ref: ResourceRef | None = None) -> int:
        """Make every open watch stream (of one kind, or all) deliver nothing more while
        it stays open (a half-open connection); returns how many."""
        return self.hub.silence(None if ref is None else self.resolve(ref))

    def open_watches(self, ref: ResourceRef | None = None) -> int:
        """How many watch streams are open right now."""
        return self.hub.count(None if ref is None else self.resolve(ref))

    def set_delay(self, seconds: float, ref: ResourceRef | None = None) -> None:
        """Delay HTTP answers (for one kind, or all requests) by `seconds`; 0 removes it."""
        self.faults.set_delay(seconds, "*" if ref is None else self.resolve(ref).key)

    def clear_faults(self) -> None:
        """Remove every injected failure and delay."""
        self.faults.clear()

    def request_counts(self) -> dict[str, int]:
        """HTTP requests served to resource URLs so far, by verb (get, list, watch, patch...)."""
        return dict(self.handler.counts)
