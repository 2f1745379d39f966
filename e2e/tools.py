"""Running the command-line tools the kind drills need (docker, kind, kubectl, helm)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

TOOLS = ("docker", "kind", "kubectl", "helm")

T = TypeVar("T")


def missing_tools() -> list[str]:
    """What is missing for the e2e suite: absent tools, or a Docker daemon that does not answer."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if "docker" not in missing:
        try:
            subprocess.run(["docker", "info"], capture_output=True, check=True, timeout=20)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
            missing.append("a running Docker daemon")
    return missing


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
        self, context: str, *, kubeconfig: str | None = None, kubectl: str = "kubectl"
    ) -> None:
        self.context = context
        self.kubeconfig = kubeconfig
        self.kubectl_path = kubectl

    def _config(self) -> list[str]:
        return ["--kubeconfig", self.kubeconfig] if self.kubeconfig else []

    def kubectl(self, *args: str, timeout: float = 120, input_text: str | None = None) -> str:
        return run(
            self.kubectl_path, *self._config(), "--context", self.context, *args,
            timeout=timeout, input_text=input_text,
        )

    def helm(self, *args: str, timeout: float = 600) -> str:
        return run("helm", *self._config(), "--kube-context", self.context, *args,
                   timeout=timeout)


def wait_for(
    what: str, check: Callable[[], T | None], *, timeout_s: float, interval_s: float = 1.0
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
