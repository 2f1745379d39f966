"""The operator's credentials stay valid on the real API server: a rejected token leads
to one re-login and the rounds go on; a token that stays bad fails requests, not the
operator.

The operator runs as ``kooper run --kubeconfig`` whose user is a ``tokenFile``, as
kubectl and client-go read it. Its token is a ServiceAccount TokenRequest bound to a
Secret: deleting the Secret makes the API server reject the token at once, the 401 a
real expiry gives. (The server's own floors keep a real expiry out of a test:
TokenRequest's ``expirationSeconds`` is at least 600 and
``--service-account-max-token-expiration`` at least 1 h.)
"""

from __future__ import annotations

import re
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.conftest import kooper_run, wait_for

from kooper.sdk import apierrors
from kooper.sdk import kube as kube_api

pytestmark = pytest.mark.realk8s

SA = "token-op"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bound_token(admin: kube_api.Api, namespace: str, secret: str) -> str:
    """A token of ``SA`` valid while the Secret ``secret`` exists."""
    created = admin.create(f"/api/v1/namespaces/{namespace}/secrets",
                           {"metadata": {"name": secret}, "type": "Opaque"})
    answer = admin.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{SA}/token",
        {"spec": {"expirationSeconds": 600, "boundObjectRef": {
            "apiVersion": "v1", "kind": "Secret", "name": secret,
            "uid": created["metadata"]["uid"]}}})
    return str(answer["status"]["token"])


def rejected(cluster, token: str) -> bool:
    api = kube_api.Api(kube_api.Connection(server=cluster.server, token=token,
                                           ca_path=str(cluster.ca_file)))
    try:
        api.get("/api/v1/namespaces/default")
    except apierrors.Unauthorized:
        return True
    except apierrors.ApiError:
        return False
    return False


def _metrics(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def logins(port: int) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^kooper_logins_total\{reason="([^"]+)"\} ([0-9.e+]+)$', _metrics(port), re.M)}


def round_failures(port: int) -> float:
    found = re.search(r'^kooper_round_failures_total\{[^}]*workergroup="g"[^}]*\} ([0-9.e+]+)$',
                      _metrics(port), re.M)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
def operator(  # noqa: PLR0917
        cluster, admin, k, crds, namespace, tmp_path) -> Iterator[tuple[int, Path]]:
    """``kooper run`` on a tokenFile kubeconfig, watching ``namespace``; its metrics port."""
    admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": SA}})
    binding = f"{namespace}-{SA}"
    k.kubectl("create", "clusterrolebinding", binding, "--clusterrole=cluster-admin",
              f"--serviceaccount={namespace}:{SA}")
    token_file = tmp_path / "token"
    token_file.write_text(bound_token(admin, namespace, "first"))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: op\n"
        f"contexts: [{{name: op, context: {{cluster: local, user: op, namespace: {namespace}}}}}]\n"
        f"clusters: [{{name: local, cluster: {{server: '{cluster.server}', "
        f"certificate-authority: '{cluster.ca_file}'}}}}]\n"
        "users: [{name: op, user: {tokenFile: token}}]\n")
    port = _free_port()
    try:
        with kooper_run(kubeconfig, namespace, tmp_path / "operator.log", metrics_port=port):
            yield port, token_file
    finally:
        k.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")


def test_a_rejected_token_is_one_relogin_and_the_rounds_go_on(cluster, admin, namespace,
                                                                operator):
    port, token_file = operator
    groups = f"/apis/kooper.dev/v1alpha1/namespaces/{namespace}/workergroups"
    admin.create(groups, {"apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
                          "metadata": {"name": "g"},
                          "spec": {"selector": {"matchLabels": {"app": "none"}},
                                   "scheduledRebalanceMaxDelay": "30s"}})

    def observed(generation: int) -> bool:
        body = admin.get(f"{groups}/g")
        return int((body.get("status") or {}).get("observedGeneration") or 0) >= generation

    wait_for("the first round's status", lambda: observed(1), timeout_s=120)
    assert logins(port) == {"start": 1.0}

    old = token_file.read_text()
    token_file.write_text(bound_token(admin, namespace, "second"))
    admin.delete(f"/api/v1/namespaces/{namespace}/secrets/first")
    wait_for("the API server to reject the first token", lambda: rejected(cluster, old))

    admin.merge_patch(f"{groups}/g", {"spec": {"scheduledRebalanceMaxDelay": "40s"}})
    wait_for("a round written with the renewed token", lambda: observed(2), timeout_s=120)
    counted = logins(port)
    relogins = sum(v for reason, v in counted.items() if reason != "start")
    assert 1 <= relogins <= 2, counted  # kooper's writes and kopf's watches: one each at most

    # A token that stays bad: requests fail, the operator stays up, logins stay few.
    second = token_file.read_text()
    token_file.write_text("not-a-token")
    admin.delete(f"/api/v1/namespaces/{namespace}/secrets/second")
    wait_for("the API server to reject the second token", lambda: rejected(cluster, second))
    admin.merge_patch(f"{groups}/g", {"spec": {"scheduledRebalanceMaxDelay": "50s"}})
    before = sum(logins(port).values())
    failures = round_failures(port)
    wait_for("a round that fails on the bad token", lambda: round_failures(port) > failures + 1)
    assert not observed(3)
    assert sum(logins(port).values()) - before <= 10  # at most ~1 a second, not a loop
    token_file.write_text(bound_token(admin, namespace, "third"))
    wait_for("the rounds to resume with a good token again", lambda: observed(3),
             timeout_s=120)
