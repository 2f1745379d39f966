"""The operator's probes: ``/healthz`` (liveness) and ``/readyz`` (readiness) on one port.

Liveness answers "restart me?": the event loop answers, and no group's runner has
died (a dead runner no longer rebalances its group; a restart brings it back).
Readiness answers "am I working yet?": kopf ran the startup handler, so the
client, the indexes and the runners exist. Both are decided by pure functions of
the ``Shell``; the server only answers HTTP.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from kooper.shell import controller

LIVE_PATH = "/healthz"
READY_PATH = "/readyz"


def liveness(shell: controller.Shell) -> tuple[bool, dict[str, Any]]:
    """``(live, detail)``: False once some group's runner task has ended."""
    dead = sorted(f"{ns}/{name}" for (ns, name), runner in shell.runners.items()
                  if runner.task is not None and runner.task.done())
    return not dead, {"groups": len(shell.runners), "stopped_runners": dead}


def readiness(shell: controller.Shell) -> tuple[bool, dict[str, Any]]:
    """``(ready, detail)``: True once the startup handler built the shared context.

    A standby (leader election, another replica holds the Lease) is ready too: its
    indexes are warm and it takes over by itself; ``role`` says which it is.
    """
    started = shell.context is not None
    detail: dict[str, Any] = {"started": started, "groups": len(shell.runners),
                              "role": "leader" if shell.leading else "standby"}
    if shell.elector is not None:
        detail["leader"] = shell.elector.holder
    return started, detail


def application(shell: controller.Shell) -> web.Application:
    """The aiohttp application answering both probes (200 or 503, a JSON body)."""

    def answer(check: Any) -> Any:
        async def handle(_: web.Request) -> web.Response:
            ok, detail = check(shell)
            return web.Response(status=200 if ok else 503, content_type="application/json",
                                text=json.dumps({"ok": ok, **detail}))
        return handle

    app = web.Application()
    app.add_routes([web.get(LIVE_PATH, answer(liveness)), web.get(READY_PATH, answer(readiness))])
    return app


async def serve(shell: controller.Shell, *, port: int, host: str = "0.0.0.0") -> web.AppRunner:
    """Start answering on ``host:port``; ``await runner.cleanup()`` to stop."""
    runner = web.AppRunner(application(shell), handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
