"""Liveness and readiness over HTTP (``/healthz``, ``/readyz``) on the standard library."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable


def serve(
    *, port: int, live: Callable[[], bool], ready: Callable[[], bool], host: str = "0.0.0.0"
) -> http.server.ThreadingHTTPServer:
    """Serve the probes on a daemon thread; ``shutdown()`` the returned server to stop."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            checks = {"/healthz": live, "/livez": live, "/readyz": ready}
            check = checks.get(self.path.split("?")[0])
            if check is None:
                self._answer(404, b"not found\n")
            elif check():
                self._answer(200, b"ok\n")
            else:
                self._answer(503, b"not ok\n")

        def _answer(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # probes every few seconds would drown the log

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="kooper-health", daemon=True).start()
    return server
