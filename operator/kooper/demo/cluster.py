"""The embedded cluster: the API emulator on 127.0.0.1 plus the real operator as a subprocess.

The operator runs as ``kooper run`` in its own process, pointed at the
emulator through ``KOOPER_KUBE_API``: exactly the code a real deployment runs,
and a crash or a hang in it cannot take the demo's own process down.
"""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import time
from types import TracebackType
from typing import IO, Any, Self

from kooper.demo import pods
from kooper.emulator import cluster as emulated

CRDS_DIR = pathlib.Path(__file__).resolve().parents[3] / "crds"
"""The project's CRDs (the emulator falls back to its built-in contract without them)."""


class EmbeddedCluster:
    """An emulator serving HTTP and ``kooper run`` against it; a context manager."""

    def __init__(self, *, workdir: pathlib.Path, namespace: str = "default",
                 operator_command: tuple[str, ...] | None = None) -> None:
        """Prepare; ``operator_command`` replaces ``python -m kooper.cli run`` (tests)."""
        self.workdir = workdir
        self.namespace = namespace
        crds = sorted(CRDS_DIR.glob("*.yaml")) if CRDS_DIR.is_dir() else []
        self.api = emulated.EmulatedCluster(crds=crds)
        self.audit_log = workdir / "operator.audit.jsonl"
        self.operator_log_path = workdir / "operator.log"
        self.operator_command = operator_command or (sys.executable, "-m", "kooper.cli", "run")
        self.operator: subprocess.Popen[bytes] | None = None
        self._operator_log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """The emulator's base URL."""
        return self.api.url

    def start(self) -> str:
        """Start the emulator, then the operator; returns the API URL."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        url = self.api.start()
        self._operator_log = self.operator_log_path.open("wb")
        argv = [*self.operator_command, "--namespace", self.namespace, "--metrics-port", "0",
                "--health-port", "0", "--audit-log", str(self.audit_log)]
        self.operator = subprocess.Popen(argv, env=pods.child_env(url),
                                         stdout=self._operator_log, stderr=subprocess.STDOUT)
        return url

    def describe(self) -> str:
        """The progress line of a run: where the API is, the operator's pid."""
        pid = f"; operator pid {self.operator.pid}" if self.operator is not None else ""
        return f"emulator at {self.url}{pid}"

    def how_to_look(self) -> list[str]:
        """Commands that look at the kept cluster from another shell (writes a kubeconfig)."""
        kubeconfig = self.write_kubeconfig().resolve()
        return [f"KOOPER_KUBE_API={self.url} kooper status demo",
                f"kubectl --kubeconfig {kubeconfig} get wg,kconn,pods,events",
                "(kubectl verbs the emulator serves: docs/emulator.md)"]

    def write_kubeconfig(self) -> pathlib.Path:
        """``<workdir>/kubeconfig``: kubectl's way in (no credentials: the emulator needs none)."""
        path = self.workdir / "kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "kooper-demo",
            "clusters": [{"name": "kooper-demo", "cluster": {"server": self.url}}],
            "users": [{"name": "kooper-demo", "user": {}}],
            "contexts": [{"name": "kooper-demo", "context": {
                "cluster": "kooper-demo", "user": "kooper-demo", "namespace": self.namespace}}],
        }, indent=2) + "\n")
        return path

    def check_operator(self) -> None:
        """Raise if the operator process died (with the tail of its log)."""
        if self.operator is not None and self.operator.poll() is not None:
            raise pods.DemoError(f"the operator exited with {self.operator.returncode}: "
                                 + pods.log_tail(self.operator_log_path))

    def create(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create an object in the demo namespace."""
        return self.api.create(ref, body, namespace=self.namespace)

    def get(self, ref: str, name: str) -> dict[str, Any] | None:
        """An object of the demo namespace, or None."""
        return self.api.get(ref, name, namespace=self.namespace)

    def stop(self) -> None:
        """Stop the operator (SIGTERM, then SIGKILL), then the emulator."""
        if self.operator is not None and self.operator.poll() is None:
            self.operator.send_signal(signal.SIGTERM)
            try:
                self.operator.wait(10)
            except subprocess.TimeoutExpired:
                self.operator.kill()
                self.operator.wait()
        if self._operator_log is not None:
            self._operator_log.close()
            self._operator_log = None
        self.api.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def wait_for(predicate: Any, *, timeout_s: float, what: str, poll_s: float = 0.1) -> None:
    """Poll ``predicate()`` until true; TimeoutError naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(poll_s)
