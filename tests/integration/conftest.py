"""The integration tests on the real local control plane (``realk8s``).

They share the session's local cluster with the e2e drills (``e2e.localcluster``):
real kube-apiserver, etcd and kube-controller-manager, pods as local processes.
Each test module works in namespaces of its own, so the drills' chart release (in
namespace ``kooper``) and these never see each other's objects.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from e2e import localcluster, tools

from kooper.controlplane import host
from kooper.demo import localplane
from kooper.sdk import kube as kube_api

ROOT = pathlib.Path(__file__).resolve().parents[2]
_names = itertools.count()


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> host.Handle:
    return localcluster.shared(request.config, tmp_path_factory)


@pytest.fixture(scope="session")
def k(cluster: host.Handle) -> tools.Kube:
    """kubectl as the cluster's admin."""
    return localcluster.kube_of(cluster)


@pytest.fixture(scope="session")
def admin(cluster: host.Handle) -> kube_api.Api:
    """The worker SDK's REST client, as the cluster's admin."""
    return kube_api.Api(cluster.server, token_file=cluster.admin_token_file,
                        ca_file=cluster.ca_file, timeout_s=30)


@pytest.fixture(scope="session")
def crds(k: tools.Kube) -> None:
    """``kubectl apply -f crds/`` (server-side), then wait until the API serves them."""
    k.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    k.wait_established(*localplane.CRD_NAMES)


@pytest.fixture
def namespace(k: tools.Kube) -> Iterator[str]:
    """A fresh namespace, deleted after the test."""
    name = f"it-{next(_names)}"
    k.kubectl("create", "namespace", name)
    yield name
    k.kubectl("delete", "namespace", name, "--wait=false")


def get_json(k: tools.Kube, *args: str) -> Any:
    return json.loads(k.kubectl("get", *args, "-o", "json"))


def refused(k: tools.Kube, *args: str, input_text: str | None = None) -> str:
    """kubectl's stderr for a command the server must refuse (fails the test otherwise)."""
    try:
        out = k.kubectl(*args, input_text=input_text)
    except subprocess.CalledProcessError as exc:
        return str(exc.stderr)
    pytest.fail(f"the server accepted kubectl {' '.join(args)}: {out}")


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 120) -> Any:
    return tools.wait_for(what, check, timeout_s=timeout_s, interval_s=0.5)


@contextlib.contextmanager
def kooper_run(kubeconfig: pathlib.Path, namespace: str, log: pathlib.Path, *,
               metrics_port: int = 0) -> Iterator[subprocess.Popen[bytes]]:
    """``kooper run --kubeconfig`` as a local process watching ``namespace`` (no in-cluster
    or emulator variables leak in); stopped after, and it must not have crashed."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KOOPER_", "KUBERNETES_SERVICE", "KUBECONFIG"))}
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kooper", "run", "--kubeconfig", str(kubeconfig),
             "--namespace", namespace, "--metrics-port", str(metrics_port),
             "--health-port", "0"],
            cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT / "operator")}, stdout=out,
            stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
            process.kill()
            process.wait()
    assert process.returncode in (0, -15, -9), log.read_text()
