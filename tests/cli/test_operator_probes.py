"""``kooper run`` serves /healthz (liveness) and /readyz (readiness) on the chart's port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kooper.commands import status as status_command
from kooper.emulator import cluster
from kooper.sdk import apierrors
from kooper.sdk.connection import Connection
from kooper.shell import controller, probes, settings
from kooper.shell.login import Login

ROOT = Path(__file__).resolve().parents[2]


def test_ready_once_the_startup_handler_built_the_context_and_live_meanwhile():
    shell = controller.Shell(settings.Config())
    assert probes.readiness(shell) == (False, {"started": False, "groups": 0,
                                           "role": "leader"})
    assert probes.liveness(shell) == (True, {"groups": 0, "stopped_runners": []})
    shell.login = Login.static(Connection(server="http://127.0.0.1:1"))
    shell.start({})
    assert probes.readiness(shell)[0]
    assert probes.liveness(shell)[0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}") if exc.code == 503 else {}


def _wait_ready(url: str, operator: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert operator.poll() is None, operator.communicate()[1]
        try:
            if _get(url)[0] == 200:
                return
        except (urllib.error.URLError, ConnectionError):
            pass  # not listening yet
        time.sleep(0.1)
    raise AssertionError(f"{url} never answered 200")


def test_kooper_run_answers_both_probes_and_stops_on_sigterm(tmp_path: Path):
    port = _free_port()
    with cluster.EmulatedCluster(crds=sorted((ROOT / "crds").glob("*.yaml"))) as emulated:
        env = {**os.environ, "KOOPER_KUBE_API": emulated.url, "HOME": str(tmp_path)}
        operator = subprocess.Popen(
            [sys.executable, "-m", "kooper", "run", "--metrics-port", "0",
             "--health-port", str(port), "--no-gc-freeze"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_ready(f"http://127.0.0.1:{port}/readyz", operator)
            status, body = _get(f"http://127.0.0.1:{port}/readyz")
            assert (status, body["started"]) == (200, True)
            status, body = _get(f"http://127.0.0.1:{port}/healthz")
            assert (status, body["ok"]) == (200, True)
            assert _get(f"http://127.0.0.1:{port}/nope")[0] == 404
        finally:
            operator.send_signal(signal.SIGTERM)
            _, err = operator.communicate(timeout=30)
        assert "Traceback" not in err



@pytest.mark.parametrize(("status", "hint"), [
    (404, "are kooper's CRDs installed? (kubectl apply -f crds/)"),
    (403, "the credentials lack a permission (RBAC: the chart's operator role)"),
    (401, "the credentials were rejected"),
])
def test_a_refused_preflight_says_what_to_check(status: int, hint: str):
    refused = apierrors.ApiError(f"GET /apis/kooper.dev/v1alpha1/workergroups: {status} no",
                             status=status)
    message = str(status_command.api_error(refused, "https://api:6443"))
    assert message.startswith(f"https://api:6443: GET /apis/kooper.dev/v1alpha1/workergroups: "
                              f"{status} no: ")
    assert message.endswith(hint)
