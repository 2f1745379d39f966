"""A fault-injecting, TLS-terminating reverse proxy in front of a real kube-apiserver.

The real chaos run (e2e/chaos_real.py, ``backend="real"``) puts this between the
kooper processes (``kooper run``, every ``kooper worker``) and kube-apiserver, so the
same API faults the emulator injects (``kooper.emulator.faults``) hit a real server's
clients:

* ``fail_next_writes(count, code)``: the next ``count`` writes (POST, PUT, PATCH,
  DELETE) of *any* client are answered ``code`` (500 or 429, the latter with
  ``Retry-After``) instead of being forwarded; the count is taken under a lock, so
  exactly ``count`` requests get the error whoever sends them;
* ``set_delay(seconds)``: every request is held that long before it is forwarded
  (watches included: the watch's answer starts that much later), as the emulator's
  slow API does;
* ``partition(client)`` / ``heal(client)``: one client is cut off. Every client has a
  listening port of its own (``add_client``), so the proxy knows who is asking
  without looking at credentials: a partitioned client's connections are closed
  (open watches included) and its new requests get no answer but a closed connection;
* ``trap(client, method, path_fragment, on_trap)``: the first request of ``client``
  with that method whose path contains the fragment calls ``on_trap()`` (in the
  proxy's thread, as the request arrives: the stale-leader test SIGSTOPs the sender
  there) and is *held*, not forwarded, until ``Trap.release()``; then it goes on as
  any request (a client that gave up meanwhile gets nothing forwarded: status 0).

When the API server itself is down (killed, restarting: e2e/leaders.py's
``api-restart``), a request it cannot take is answered as a direct connection would
be, with no answer but a closed connection (recorded as status 0), and an open watch
it was streaming is cut where the server's stream broke.

TLS: the proxy serves a certificate for 127.0.0.1 and localhost that it mints with the
``openssl`` command from a CA the clients trust: the local control plane's own CA when
its key is at hand (``kooper.controlplane.pki`` keeps ``ca.key`` next to ``ca.crt``),
else a throw-away CA of its own (``ca_file`` says which; give it to the clients).
Upstream it verifies the API server with the cluster's CA. Requests are forwarded
with their headers (the bearer token included) and answers are streamed back chunk by
chunk, so watches work through it.

The HTTP work is aiohttp's (server and client), which kopf already depends on. The
proxy runs its own event loop in a thread, like the emulator (``start``/``stop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp
import aiohttp.web

from kooper.controlplane import pki

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "te", "trailer", "transfer-encoding", "upgrade", "host",
                        "content-length"})
"""Headers that describe one connection, not the message (RFC 9110 7.6.1), and the ones
aiohttp sets itself."""
REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
HELD = aiohttp.web.RequestKey("kooper.fault_proxy.held", bool)
"""The request's key that says the slow API held it."""
TRAPPED = aiohttp.web.RequestKey("kooper.fault_proxy.trapped", bool)
"""The request's key that says a trap held it."""
RETRY_AFTER_S = 1
"""What a 429 says in ``Retry-After`` (kube-apiserver's priority and fairness says 1)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Exchange:
    """One request the proxy answered (or refused), in the order the answers began."""

    client: str
    method: str
    path: str
    status: int
    """The answer's status (0: nothing was forwarded: a partition closed the connection,
    or the client went away while a trap held the request)."""
    injected: bool
    """Whether the proxy made the answer up (a burst's error) instead of forwarding."""
    held: bool = False
    """Whether the slow API held the request before it was answered."""
    watch: bool = False
    """Whether the request was a watch (``?watch=1``)."""
    trapped: bool = False
    """Whether a trap held the request (status 0: its client went away while held, so
    it was never forwarded)."""

    @property
    def write(self) -> bool:
        """Whether the request was a write (what bursts answer)."""
        return self.method in WRITE_METHODS


class Trap:
    """One armed trap (``FaultProxy.trap``): fires once, holds its request until released."""

    def __init__(self, client: str, method: str, fragment: str,
                 on_trap: Callable[[], None]) -> None:
        self.client = client
        self.method = method
        self.fragment = fragment
        self.on_trap = on_trap
        self.fired = threading.Event()
        """Set once the request arrived (after ``on_trap`` returned)."""
        self.path = ""
        """The path of the request it caught."""
        self.fired_ms = 0
        """When it caught it (wall clock, ms)."""
        self.released_ms = 0
        """When ``release`` was called (wall clock, ms; 0: not yet)."""
        self.sprung = False
        """Whether it caught its request (set under the proxy's lock)."""
        self._released = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._lock = threading.Lock()

    def matches(self, client: str, request: aiohttp.web.BaseRequest) -> bool:
        """Whether ``request`` of ``client`` is the one this trap waits for."""
        return (not self.sprung and client == self.client and request.method == self.method
                and self.fragment in request.path)

    def wait(self, timeout_s: float) -> bool:
        """Wait until the trap fired; whether it did."""
        return self.fired.wait(timeout_s)

    def release(self) -> None:
        """Let the held request go on (forwarded as usual); safe to call twice."""
        with self._lock:
            if self._released.is_set():
                return
            self.released_ms = int(time.time() * 1000)
            self._released.set()
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    async def hold(self) -> None:
        """Wait (in the proxy's loop) until ``release``."""
        event = asyncio.Event()
        with self._lock:
            if self._released.is_set():
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        await event.wait()


def mint_certificate(directory: pathlib.Path, *, ca_cert: pathlib.Path | None = None,
                     ca_key: pathlib.Path | None = None) -> tuple[pathlib.Path, pathlib.Path,
                                                                  pathlib.Path]:
    """A serving certificate for 127.0.0.1/localhost: (CA to trust, certificate, key).

    Signed by ``ca_cert``/``ca_key`` when both are given, else by a new CA made here.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ec = pki.EC
    if ca_cert is None or ca_key is None:
        pki.openssl("req", "-x509", *ec, "-nodes", "-keyout", "proxy-ca.key",
                 "-out", "proxy-ca.crt", "-days", "2", "-subj", "/CN=kooper-fault-proxy-ca",
                 cwd=directory)
        ca_cert, ca_key = directory / "proxy-ca.crt", directory / "proxy-ca.key"
    pki.openssl("req", "-new", *ec, "-nodes", "-keyout", "proxy.key", "-out", "proxy.csr",
             "-subj", "/CN=kooper-fault-proxy",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", cwd=directory)
    pki.openssl("x509", "-req", "-in", "proxy.csr", "-CA", str(ca_cert), "-CAkey", str(ca_key),
             "-CAcreateserial", "-CAserial", str(directory / "proxy-ca.srl"), "-days", "2",
             "-copy_extensions", "copy", "-out", "proxy.crt", cwd=directory)
    return ca_cert, directory / "proxy.crt", directory / "proxy.key"


class FaultProxy:
    """The proxy: ``start`` it, ``add_client`` a port per client, switch faults on and off.

    Every method is thread-safe (the server runs in a thread of its own).
    """

    def __init__(self, upstream: str, *, upstream_ca: pathlib.Path | None, workdir: pathlib.Path,
                 ca_key: pathlib.Path | None = None, tls: bool | None = None) -> None:
        """``upstream``: the API server's base URL; ``upstream_ca``: its CA (also the proxy's
        when ``ca_key``, that CA's key, is given); certificates go to ``workdir``; ``tls``:
        whether the proxy serves HTTPS (default: when the upstream does)."""
        self.upstream = upstream.rstrip("/")
        self._tls = self.upstream.startswith("https://") if tls is None else tls
        self._upstream_ca = upstream_ca
        self._workdir = workdir
        self._ca_key = ca_key
        self.ca_file: pathlib.Path | None = None
        """The CA that signed the proxy's certificate (clients must trust it)."""
        self._lock = threading.Lock()
        self._failures: list[list[int]] = []
        """[remaining, code] per burst, oldest first."""
        self._delay_s = 0.0
        self._delay_changed = asyncio.Event()
        self._holding = 0
        self._partitioned: set[str] = set()
        self._traps: list[Trap] = []
        self._streams: dict[str, set[asyncio.Task[Any]]] = {}
        self._ports: dict[str, int] = {}
        self._clients_by_port: dict[int, str] = {}
        self.exchanges: list[Exchange] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: aiohttp.web.ServerRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._server_ssl: ssl.SSLContext | None = None
        self._client_ssl: ssl.SSLContext | bool = False

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Mint the certificate and start the server's thread (no port open yet)."""
        if self._tls:
            ca_cert = self._upstream_ca if self._ca_key is not None else None
            self.ca_file, cert, key = mint_certificate(self._workdir, ca_cert=ca_cert,
                                                       ca_key=self._ca_key)
            self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._server_ssl.load_cert_chain(cert, key)
        if self.upstream.startswith("https://"):
            self._client_ssl = ssl.create_default_context(
                cafile=str(self._upstream_ca) if self._upstream_ca else None)
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fault-proxy",
                                        daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._setup(), loop).result(10)
        return self

    async def _setup(self) -> None:
        server = aiohttp.web.Server(self._handle, handler_cancellation=True)
        self._runner = aiohttp.web.ServerRunner(server, shutdown_timeout=1.0)
        await self._runner.setup()
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ssl=self._client_ssl),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False)

    def stop(self) -> None:
        """Close every connection and the server's thread; safe to call twice."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._teardown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        self._loop = self._thread = None

    async def _teardown(self) -> None:
        for tasks in self._streams.values():
            for task in tasks:
                task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- clients -------------------------------------------------------------------------

    def add_client(self, name: str) -> int:
        """The port of client ``name`` (opened on first use): what it sends is tagged ``name``."""
        with self._lock:
            if name in self._ports:
                return self._ports[name]
        assert self._loop is not None, "start the proxy first"
        port = asyncio.run_coroutine_threadsafe(self._open_site(), self._loop).result(10)
        with self._lock:
            self._ports[name] = port
            self._clients_by_port[port] = name
        return port

    async def _open_site(self) -> int:
        assert self._runner is not None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        site = aiohttp.web.SockSite(self._runner, sock, ssl_context=self._server_ssl)
        await site.start()
        return int(sock.getsockname()[1])

    def url(self, client: str) -> str:
        """The base URL client ``client`` should use."""
        scheme = "https" if self._server_ssl is not None else "http"
        return f"{scheme}://127.0.0.1:{self.add_client(client)}"

    # --- faults ----------------------------------------------------------------------------

    def fail_next_writes(self, count: int, *, code: int) -> None:
        """Answer the next ``count`` writes of any client with ``code`` (500, 429...)."""
        with self._lock:
            self._failures.append([count, code])

    def pending_failures(self) -> int:
        """How many injected errors are still to be served."""
        with self._lock:
            return sum(remaining for remaining, _ in self._failures)

    def set_delay(self, seconds: float) -> None:
        """Hold every request ``seconds`` from its arrival before forwarding it; 0 removes
        the delay. A change applies to the requests held now too (0 releases them)."""
        with self._lock:
            self._delay_s = max(0.0, seconds)
            changed, self._delay_changed = self._delay_changed, asyncio.Event()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(changed.set)

    def holding(self) -> int:
        """How many requests are being held by the delay right now."""
        with self._lock:
            return self._holding

    def partition(self, client: str) -> None:
        """Cut ``client`` off: its open requests and watches end, new ones are refused."""
        with self._lock:
            self._partitioned.add(client)
            tasks = list(self._streams.get(client, ()))
        if self._loop is not None:
            for task in tasks:
                self._loop.call_soon_threadsafe(task.cancel)

    def heal(self, client: str) -> None:
        """Let ``client`` through again."""
        with self._lock:
            self._partitioned.discard(client)

    def trap(self, client: str, method: str, path_fragment: str,
             on_trap: Callable[[], None] = lambda: None) -> Trap:
        """Arm a trap: the first ``method`` request of ``client`` whose path contains
        ``path_fragment`` calls ``on_trap()`` (in the proxy's thread, before anything
        else happens to it) and is held, not forwarded, until the trap's ``release()``.
        Requests that arrive while it is held pass as usual."""
        trap = Trap(client, method, path_fragment, on_trap)
        with self._lock:
            self._traps.append(trap)
        return trap

    def clear(self) -> None:
        """Remove every fault (armed traps are disarmed, held requests released)."""
        with self._lock:
            self._failures.clear()
            self._delay_s = 0.0
            self._partitioned.clear()
            traps, self._traps = self._traps, []
        for trap in traps:
            trap.release()

    # --- what happened -------------------------------------------------------------------

    def served(self, code: int, clients: Iterable[str] | None = None) -> int:
        """How many injected ``code`` answers went out (to ``clients``, default any)."""
        wanted = None if clients is None else set(clients)
        with self._lock:
            return sum(1 for e in self.exchanges if e.injected and e.status == code
                       and (wanted is None or e.client in wanted))

    def history(self) -> list[Exchange]:
        """Every exchange so far (a copy)."""
        with self._lock:
            return list(self.exchanges)

    # --- the handler -----------------------------------------------------------------------

    def _take_failure(self, method: str) -> int | None:
        if method not in WRITE_METHODS:
            return None
        with self._lock:
            for burst in self._failures:
                if burst[0] > 0:
                    burst[0] -= 1
                    return burst[1]
        return None

    def _record(self, client: str, request: aiohttp.web.BaseRequest, status: int,
                *, injected: bool = False) -> None:
        held = bool(request.get(HELD, False))
        watch = request.query.get("watch") in ("1", "true")
        trapped = bool(request.get(TRAPPED, False))
        with self._lock:
            self.exchanges.append(Exchange(client, request.method, request.path, status,
                                           injected, held, watch, trapped))

    def _take_trap(self, client: str, request: aiohttp.web.BaseRequest) -> Trap | None:
        with self._lock:
            for trap in self._traps:
                if trap.matches(client, request):
                    trap.sprung = True
                    return trap
        return None

    async def _spring(self, trap: Trap, client: str,
                      request: aiohttp.web.BaseRequest) -> None:
        """Call ``on_trap`` and hold ``request`` until released (the client may go away
        meanwhile: then it is recorded as never forwarded, status 0)."""
        request[TRAPPED] = True
        trap.path = request.path
        trap.fired_ms = int(time.time() * 1000)
        try:
            trap.on_trap()
        finally:
            trap.fired.set()
        try:
            await trap.hold()
        except asyncio.CancelledError:
            self._record(client, request, 0)
            raise

    async def _hold(self, request: aiohttp.web.BaseRequest) -> None:
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        while True:
            with self._lock:
                remaining = arrived + self._delay_s - loop.time()
                changed = self._delay_changed
                if remaining <= 0:
                    return
                self._holding += 1
            request[HELD] = True
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    self._holding -= 1

    async def _handle(self, request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        with self._lock:
            client = self._clients_by_port.get(int(sockname[1]) if sockname else -1, "?")
        trap = self._take_trap(client, request)
        if trap is not None:
            await self._spring(trap, client, request)
        await self._hold(request)
        if self._cut_off(client, request):
            raise asyncio.CancelledError  # the connection is closed: nothing to answer
        code = self._take_failure(request.method)
        if code is not None:
            self._record(client, request, code, injected=True)
            reason = REASONS.get(code, "Injected")
            headers = {"Retry-After": str(RETRY_AFTER_S)} if code == 429 else {}
            return aiohttp.web.json_response(
                {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": f"injected by the fault proxy: {request.method} {request.path}",
                 "reason": reason, "code": code}, status=code, headers=headers)
        task = asyncio.current_task()
        assert task is not None
        with self._lock:
            self._streams.setdefault(client, set()).add(task)
        try:
            return await self._forward(client, request)
        except aiohttp.ClientError:
            # The API server refused or dropped the connection before it answered.
            self._record(client, request, 0)
            if request.transport is not None:
                request.transport.close()
            raise asyncio.CancelledError from None
        except asyncio.CancelledError:
            self._cut_off(client, request)
            raise
        finally:
            with self._lock:
                self._streams.get(client, set()).discard(task)

    def _cut_off(self, client: str, request: aiohttp.web.BaseRequest) -> bool:
        with self._lock:
            cut = client in self._partitioned
        if cut:
            self._record(client, request, 0)
            if request.transport is not None:
                request.transport.close()
        return cut

    async def _forward(self, client: str, request: aiohttp.web.BaseRequest
                       ) -> aiohttp.web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read() if request.can_read_body else None
        async with self._session.request(request.method, self.upstream + request.path_qs,
                                         headers=headers, data=body,
                                         allow_redirects=False) as upstream:
            self._record(client, request, upstream.status)
            response = aiohttp.web.StreamResponse(status=upstream.status,
                                                  reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    response.headers.add(key, value)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            else:
                response.enable_chunked_encoding()
            try:
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:
                pass  # the client went away (a killed process, a closed watch, a cut)
            except aiohttp.ClientError:
                # The API server went away mid-answer (a watch of a killed server):
                # the client's stream breaks there too.
                if request.transport is not None:
                    request.transport.close()
            return response

