"""``kooper cluster up|down``: a cluster kubectl can use, and nothing left behind."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from kooper.controlplane import binaries, host

pytestmark = pytest.mark.realk8s


def kooper(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kooper.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300, check=False)


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_up_gives_a_kubeconfig_for_kubectl_and_down_leaves_no_process_or_file(cluster, tmp_path):
    state = tmp_path / "cluster"
    env = {**os.environ, binaries.BIN_DIR_ENV: str(cluster.bin_dir)}
    up = kooper("cluster", "up", "--dir", str(state), env=env)
    assert up.returncode == 0, up.stderr
    handle = host.read_handle(state)
    assert handle is not None
    assert f"export KUBECONFIG={handle.kubeconfig}" in up.stdout
    children = descendants(handle.pid)
    assert len(children) >= 3  # etcd, kube-apiserver, kube-controller-manager
    nodes = json.loads(subprocess.run(
        [str(handle.kubectl), "--kubeconfig", str(handle.kubeconfig), "get", "nodes", "-o",
         "json"], capture_output=True, text=True, check=True, timeout=60).stdout)
    ready = {c["type"]: c["status"] for c in nodes["items"][0]["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert kooper("cluster", "status", "--dir", str(state), env=env).returncode == 0

    down = kooper("cluster", "down", "--dir", str(state), env=env)
    assert down.returncode == 0, down.stderr
    assert not state.exists()
    assert [pid for pid in {handle.pid, *children} if running(pid)] == []
    assert kooper("cluster", "status", "--dir", str(state), env=env).returncode == 1
