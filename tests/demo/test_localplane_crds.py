"""Installing the CRDs on the local control plane waits until they are Established, even
when ``kubectl wait`` finds a CRD that has no conditions yet (a loaded machine, right after
the apply: kubectl then fails at once instead of waiting)."""

from __future__ import annotations

import pathlib
import subprocess
from typing import Any

import pytest

from kooper.demo import localplane, pods

NO_CONDITIONS = ("error: .status.conditions accessor error: <nil> is of the type <nil>, "
                 "expected []interface{}")


class Kubectl:
    """A stand-in for ``subprocess.run`` of kubectl: each ``wait`` answers the next reply."""

    def __init__(self, waits: list[tuple[int, str]]) -> None:
        self.waits = waits
        self.calls: list[str] = []

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        verb = argv[3]
        self.calls.append(verb)
        code, stderr = self.waits.pop(0) if verb == "wait" else (0, "")
        return subprocess.CompletedProcess(argv, code, "", stderr)


def handle(tmp_path: pathlib.Path) -> Any:
    class Handle:
        kubectl = tmp_path / "kubectl"
        kubeconfig = tmp_path / "kubeconfig"
    return Handle()


def test_a_crd_without_conditions_yet_is_waited_for(tmp_path, monkeypatch):
    kubectl = Kubectl([(1, NO_CONDITIONS), (1, NO_CONDITIONS), (0, "")])
    monkeypatch.setattr(localplane.subprocess, "run", kubectl)
    monkeypatch.setattr(localplane.time, "sleep", lambda _: None)
    localplane.install_crds(handle(tmp_path))
    assert kubectl.calls == ["apply", "wait", "wait", "wait"]


def test_any_other_wait_failure_is_one_error_at_once(tmp_path, monkeypatch):
    kubectl = Kubectl([(1, "error: timed out waiting for the condition on crd/x")])
    monkeypatch.setattr(localplane.subprocess, "run", kubectl)
    with pytest.raises(pods.DemoError, match="kubectl wait crds/: error: timed out"):
        localplane.install_crds(handle(tmp_path))
    assert kubectl.calls == ["apply", "wait"]
