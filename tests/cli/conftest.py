"""Run ``kooper`` the way a user does: a subprocess, a clean environment, no kubeconfig."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest


@dataclasses.dataclass(frozen=True)
class Done:
    """What a ``kooper`` process printed and returned."""

    code: int
    out: str
    err: str


def run_kooper(args: list[str], *, home: Path, env: Mapping[str, str] | None = None,
               cwd: Path | None = None) -> Done:
    """``python -m kooper ARGS`` with HOME=``home``, no KUBECONFIG and no KOOPER_* variables."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("KOOPER_", "KUBECONFIG", "KUBERNETES_", "POD_"))}
    clean.update(HOME=str(home), **(env or {}))
    done = subprocess.run([sys.executable, "-m", "kooper", *args], capture_output=True,
                          text=True, env=clean, cwd=cwd or home, timeout=120, check=False)
    return Done(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def kooper(tmp_path: Path) -> Callable[..., Done]:
    """Run ``kooper`` in ``tmp_path`` (also its HOME: no ~/.kube/config)."""
    home = tmp_path / "home"
    home.mkdir()

    def call(*args: str, env: Mapping[str, str] | None = None) -> Done:
        return run_kooper(list(args), home=home, env=env, cwd=tmp_path)

    return call
