"""Running the command-line tools the kind drills need (docker, kind, kubectl, helm)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

KIND = pathlib.Path(__file__).resolve().parents[1] / "hack" / "kind"

T = TypeVar("T")


def kind_unavailable() -> str:
    """Why kind cannot run here ("" when it can): hack/kind/docker.sh makes a Docker daemon
    answer (installing and starting it as root on Debian) or says in one line why not."""
    try:
        done = subprocess.run(["bash", str(KIND / "docker.sh")], capture_output=True,
                              text=True, timeout=900, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no Docker daemon: {exc}"
    if done.returncode == 0:
        return ""
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"hack/kind/docker.sh exited {done.returncode}"


def use_kind_tools() -> None:
    """Put the pinned kind, helm and kubectl first on PATH (built once, cached)."""
    extra = run("bash", str(KIND / "cluster.sh"), "env", timeout=3600).strip()
    os.environ["PATH"] = f"{extra}:{os.environ['PATH']}"


def run(*args: str, timeout: float = 600, input_text: str | None = None) -> str:
    """Run a command; stdout on success, CalledProcessError (with stderr) otherwise."""
    done = subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, input=input_text, check=False
    )
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, list(args), done.stdout, done.stderr)
    return done.stdout


class Kube:
    """kubectl and helm against one kubeconfig context (kind's, or the local control plane's)."""

    def __init__(
        self, context: str, *, kubeconfig: str | None = None, kubectl: str = "kubectl",
        events_dir: pathlib.Path | None = None,
    ) -> None:
        self.context = context
        self.kubeconfig = kubeconfig
        self.kubectl_path = kubectl
        self.events_dir = events_dir
        """kind: the host directory where workers given ``--events-dir`` write their rows."""

    def _config(self) -> list[str]:
        return ["--kubeconfig", self.kubeconfig] if self.kubeconfig else []

    def kubectl(self, *args: str, timeout: float = 120, input_text: str | None = None) -> str:
        return run(
            self.kubectl_path, *self._config(), "--context", self.context, *args,
            timeout=timeout, input_text=input_text,
        )

    def wait_established(self, *crds: str) -> None:
        """Until the CRDs named are Established (``localplane.wait_established``)."""
        from kooper.demo import localplane

        localplane.wait_established(
            [self.kubectl_path, *self._config(), "--context", self.context], crds)

    def helm(self, *args: str, timeout: float = 600) -> str:
        return run("helm", *self._config(), "--kube-context", self.context, *args,
                   timeout=timeout)


def wait_for(
    what: str, check: Callable[[], T | None], *, timeout_s: float, interval_s: float = 0.5
) -> T:
    """Poll ``check`` until it returns something truthy; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except (subprocess.CalledProcessError, ValueError, KeyError) as exc:
            last_error, result = exc, None
        if result:
            return result
        time.sleep(interval_s)
    raise AssertionError(
        f"timed out after {timeout_s:.0f}s waiting for {what}"
        + (f" (last error: {last_error})" if last_error else "")
    )
