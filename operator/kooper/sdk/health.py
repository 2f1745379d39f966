"""Liveness, readiness and metrics over HTTP on the standard library.

``/healthz`` (also ``/livez``) and ``/readyz`` answer 200 or 503; ``/metrics``,
when a ``metrics`` callable is given, answers its text in the Prometheus text
exposition format (``sdk.metrics``).
"""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Callable

from kooper.sdk import metrics as sdk_metrics

logger = logging.getLogger("kooper.worker")


def serve(
    *,
    port: int,
    live: Callable[[], bool],
    ready: Callable[[], bool],
    metrics: Callable[[], str] | None = None,
    host: str = "0.0.0.0",
) -> http.server.ThreadingHTTPServer:
    """Serve the probes (and ``/metrics``) on a daemon thread; ``shutdown()`` the
    returned server to stop. ``port`` 0 picks a free port (``server_address[1]``)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/metrics" and metrics is not None:
                try:
                    body = metrics().encode()
                except Exception:  # a scrape must not kill the server: log it, answer 500
                    logger.exception("rendering /metrics failed")
                    self._answer(500, b"metrics failed\n")
                    return
                self._answer(200, body, content_type=sdk_metrics.CONTENT_TYPE)
                return
            checks = {"/healthz": live, "/livez": live, "/readyz": ready}
            check = checks.get(path)
            if check is None:
                self._answer(404, b"not found\n")
            elif check():
                self._answer(200, b"ok\n")
            else:
                self._answer(503, b"not ok\n")

        def _answer(self, code: int, body: bytes, *, content_type: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # probes every few seconds would drown the log

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="kooper-health", daemon=True).start()
    return server
