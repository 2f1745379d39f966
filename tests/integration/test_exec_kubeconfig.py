"""`kooper status` and `kooper run` with the kubeconfig EKS, GKE and AKS hand out: an exec
credential plugin, on the real API server, with the CA named by a path relative to the
file and the namespace taken from the context (no `-n`)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.conftest import ROOT, kooper_run, wait_for

pytestmark = pytest.mark.realk8s


def exec_kubeconfig(cluster, folder: Path, namespace: str) -> Path:
    """A kubeconfig whose user is a plugin printing an ExecCredential with the admin token."""
    (folder / "pki").mkdir()
    shutil.copy(cluster.ca_file, folder / "pki" / "ca.crt")
    token = Path(cluster.admin_token_file).read_text().strip()
    answer = json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                         "kind": "ExecCredential", "status": {"token": token}})
    plugin = folder / "credential-plugin"
    plugin.write_text(f"#!{sys.executable}\nprint({answer!r})\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    path = folder / "config"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: cloud\n"
        "contexts:\n- name: cloud\n  context: {cluster: cloud, user: cloud, "
        f"namespace: {namespace}}}\n"
        f"clusters:\n- name: cloud\n  cluster: {{server: '{cluster.server}', "
        "certificate-authority: pki/ca.crt}\n"
        "users:\n- name: cloud\n  user:\n    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1\n"
        f"      command: {plugin}\n      interactiveMode: Never\n")
    return path


def kooper(*args: str, **kwargs) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KOOPER_", "KUBERNETES_SERVICE", "KUBECONFIG"))}
    return subprocess.Popen([sys.executable, "-m", "kooper", *args], cwd=ROOT, text=True,
                            env={**env, "PYTHONPATH": str(ROOT / "operator")}, **kwargs)


@pytest.mark.usefixtures("crds")
def test_status_and_run_with_an_exec_plugin_and_a_relative_ca(cluster, admin, namespace,
                                                               tmp_path):
    config = exec_kubeconfig(cluster, tmp_path, namespace)
    groups = f"/apis/kooper.dev/v1alpha1/namespaces/{namespace}/workergroups"
    admin.create(groups, {"apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
                          "metadata": {"name": "cloud"},
                          "spec": {"selector": {"matchLabels": {"app": "none"}}}})
    with kooper_run(config, namespace, tmp_path / "operator.log"):
        wait_for("the operator's first round, logged in by the plugin", lambda: (
            admin.get(f"{groups}/cloud").get("status") or {}).get("observedGeneration"))
        status = kooper("status", "cloud", "--kubeconfig", str(config), "-o", "json",
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = status.communicate(timeout=120)
        assert status.returncode == 0, err
        shown = json.loads(out)
        assert (shown["namespace"], shown["name"]) == (namespace, "cloud"), shown
