"""A tiny Kubernetes REST client on the standard library (workers install nothing else).

Where and how to connect is a ``connection.Connection`` (``Api.from_env`` discovers
it: ``KOOPER_KUBE_API``, else the pod's service account). Requests and answers are
``wire``'s, errors are ``apierrors``' (the operator's aiohttp client shares all
three). This module is only the transport:

* one persistent HTTP/1.1 connection per thread (a worker sends a renewal every few
  seconds: no new TCP and TLS handshake each time), re-opened once when the server
  closed it while idle;
* the proxy of ``connection.proxy_for`` for requests and watches alike (a CONNECT
  tunnel for HTTPS);
* a 401 reads the token file again and resends once (the kubelet rotated it);
  a 429 waits the server's ``Retry-After`` (or jittered backoff) and resends.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import pathlib
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kooper.sdk import apierrors, connection, wire
from kooper.sdk.apierrors import ApiError
from kooper.sdk.connection import API_ENV, SERVICE_ACCOUNT, Connection, NoCredentialsError
from kooper.sdk.wire import (
    MERGE_PATCH,
    apps_path,
    build_request,
    configmap_path,
    custom_resource_path,
    decode_answer,
    event_path,
    lease_path,
    pod_path,
)

__all__ = [
    "API_ENV", "MERGE_PATCH", "SERVICE_ACCOUNT", "Api", "ApiError", "Connection",
    "NoCredentialsError", "WatchStream", "apps_path", "build_request", "configmap_path",
    "custom_resource_path", "decode_answer", "event_path", "lease_path", "pod_path",
]

ROLE = "worker"
THROTTLED_ATTEMPTS = 4
"""Sends of one request that 429s before its error reaches the caller."""


class Api:
    """Blocking JSON requests to one API server."""

    def __init__(
        self,
        base_url: str | Connection,
        *,
        token_file: pathlib.Path | str | None = None,
        ca_file: pathlib.Path | str | None = None,
        timeout_s: float = 10.0,
        role: str = ROLE,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if isinstance(base_url, Connection):
            self.connection = base_url
        else:
            self.connection = Connection(
                server=base_url.rstrip("/"),
                token_file=None if token_file is None else str(token_file),
                ca_path=None if ca_file is None else str(ca_file))
        self.base_url = self.connection.server.rstrip("/")
        self.timeout_s = timeout_s
        self.role = role
        self._bearer = connection.Bearer(self.connection)
        self._context = connection.ssl_context(self.connection)
        self._proxy = connection.proxy_of(self.connection, self.base_url, env)
        self._url = urllib.parse.urlsplit(self.base_url)
        self._local = threading.local()
        self._sleep = sleep

    @property
    def token_file(self) -> str | None:
        """The token file re-read for every request's credentials (None: no token)."""
        return self.connection.token_file

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, timeout_s: float = 10.0
    ) -> Api:
        """The emulator URL from ``KOOPER_KUBE_API``, else the in-cluster configuration."""
        return cls(connection.discover(environ), timeout_s=timeout_s, env=environ)

    # --- requests -------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Send one request; the decoded JSON answer, or an ``apierrors`` error."""
        reauthenticated = False
        attempt = 0
        while True:
            try:
                return self._send(method, path, body=body, content_type=content_type,
                                  query=query)
            except apierrors.Unauthorized:
                if reauthenticated or self.connection.token_file is None:
                    raise
                reauthenticated = True
                self._bearer.forget()
            except apierrors.TooManyRequests as exc:
                delay = wire.throttled_delay_s(exc, attempt)
                attempt += 1
                if delay is None or attempt >= THROTTLED_ATTEMPTS:
                    raise
                self._sleep(delay)

    def _send(self, method: str, path: str, *, body: Mapping[str, Any] | None,
              content_type: str, query: Mapping[str, str] | None) -> dict[str, Any]:
        built = build_request(method, path, role=self.role, body=body,
                              content_type=content_type, query=query,
                              authorization=self._bearer.header())
        for fresh in (False, True):
            conn, reused = self._connection(fresh)
            try:
                conn.request(method, self._target(built.target), body=built.body,
                             headers=dict(built.headers))
                response = conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self._drop()
                if reused and not fresh:
                    continue  # the server closed the idle connection: once more, anew
                raise apierrors.Unreachable(f"{method} {path}: {exc!r}", status=0) from exc
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self._drop()
                raise apierrors.Unreachable(f"{method} {path}: {exc!r}", status=0) from exc
            if response.will_close:
                self._drop()
            if response.status >= 400:
                raise wire.failure(method, path, response.status, payload,
                                   reason=response.reason,
                                   retry_after=response.getheader("Retry-After"))
            answer = decode_answer(payload)
            if answer is None:
                raise apierrors.Unreachable(f"{method} {path}: answer is not JSON", status=0)
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _connection(self, fresh: bool) -> tuple[http.client.HTTPConnection, bool]:
        current: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if current is not None and not fresh:
            return current, True
        self._drop()
        created = self._open(self.timeout_s)
        self._local.conn = created
        return created, False

    def _drop(self) -> None:
        current: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if current is not None:
            current.close()

    def _target(self, target: str) -> str:
        if self._proxy and self._url.scheme == "http":
            return self.base_url + target  # a plain HTTP proxy takes the absolute URL
        return self._url.path + target

    def _open(self, timeout_s: float) -> http.client.HTTPConnection:
        """A connection to the API server, through the proxy when one applies."""
        url = self._url
        host, port = url.hostname or "", url.port
        if self._proxy:
            proxy = urllib.parse.urlsplit(
                self._proxy if "//" in self._proxy else "http://" + self._proxy)
            if url.scheme == "https":
                tunnel = http.client.HTTPSConnection(
                    proxy.hostname or "", proxy.port or 80, timeout=timeout_s,
                    context=self._context)
                tunnel.set_tunnel(host, port or 443, headers=_proxy_headers(proxy))
                return tunnel
            return http.client.HTTPConnection(proxy.hostname or "", proxy.port or 80,
                                              timeout=timeout_s)
        if url.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=timeout_s,
                                               context=self._context)
        return http.client.HTTPConnection(host, port, timeout=timeout_s)

    def get(self, path: str, *, query: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET ``path`` (a list when ``query`` holds selectors)."""
        return self.request("GET", path, query=query)

    def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the collection ``path``."""
        return self.request("POST", path, body=body)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """PATCH ``path`` with a JSON merge patch."""
        return self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def delete(self, path: str) -> dict[str, Any]:
        """DELETE ``path``."""
        return self.request("DELETE", path)

    def close(self) -> None:
        """Close this thread's persistent connection (others close when their thread ends)."""
        self._drop()

    # --- watches --------------------------------------------------------------------

    def watch(
        self, path: str, *, query: Mapping[str, str], read_timeout_s: float
    ) -> WatchStream:
        """Open a watch on the collection ``path`` (``watch=1`` is added to ``query``).

        A connection of its own (a watch holds it for minutes), through the same proxy.
        ``read_timeout_s`` bounds every read: make it longer than the server-side
        ``timeoutSeconds``. An ``apierrors`` error if the server answers anything but 200.
        """
        built = build_request("GET", path, role=self.role, query={**query, "watch": "1"},
                              authorization=self._bearer.header())
        conn = self._open(read_timeout_s)
        try:
            conn.request("GET", self._target(built.target), headers=dict(built.headers))
            response = conn.getresponse()
            if response.status != 200:
                if response.status == 401:
                    self._bearer.forget()
                raise wire.failure("WATCH", path, response.status, response.read(),
                                   reason=response.reason,
                                   retry_after=response.getheader("Retry-After"))
        except ApiError:
            conn.close()
            raise
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise apierrors.Unreachable(f"WATCH {path}: {exc}", status=0) from exc
        return WatchStream(path, conn, response)


def _proxy_headers(proxy: urllib.parse.SplitResult) -> dict[str, str]:
    if proxy.username is None:
        return {}
    credentials = f"{urllib.parse.unquote(proxy.username)}:" \
                  f"{urllib.parse.unquote(proxy.password or '')}"
    return {"Proxy-Authorization": "Basic " + base64.b64encode(credentials.encode()).decode()}


class WatchStream:
    """One open watch response: iterate its events (dicts with ``type`` and ``object``).

    Iteration ends when the server ends the stream (its ``timeoutSeconds``, a
    restart) or after ``close``; a broken connection or a garbled line raises
    ``apierrors.Unreachable`` (status 0).
    """

    def __init__(
        self, path: str, connection: http.client.HTTPConnection, response: http.client.HTTPResponse
    ) -> None:
        self._path = path
        self._connection = connection
        self._response = response
        self._lock = threading.Lock()
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            while True:
                try:
                    line = self._response.readline()
                except Exception as exc:
                    # OSError, IncompleteRead, or (after a close() racing this read) whatever
                    # http.client trips over: the stream is over either way.
                    if self._closed:
                        return
                    raise apierrors.Unreachable(f"WATCH {self._path}: {exc!r}",
                                                status=0) from exc
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError as exc:
                    raise apierrors.Unreachable(f"WATCH {self._path}: an event is not JSON",
                                                status=0) from exc
                if isinstance(event, dict):
                    yield event
        finally:
            self.close()

    def close(self) -> None:
        """End the stream; safe from any thread (a blocked read returns at once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        sock = self._connection.sock
        if sock is not None:
            # Shutting the socket down wakes a reader blocked in recv on another thread;
            # close() alone would not.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._connection.close()

