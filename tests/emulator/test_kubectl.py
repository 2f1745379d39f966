"""Real kubectl (built by ``make kube-bins``) against the emulator, as a user of the kept demo.

``kooper demo --keep`` leaves an emulated cluster up; these are the commands a
user types at it. Without the binary the tests skip with one line (``make
test`` builds it and sets ``KOOPER_REQUIRE_REALK8S``: then they must run).
"""

import json
import os
import pathlib
import re
import subprocess

import pytest

from kooper.controlplane import binaries
from kooper.emulator import cluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
NS = "default"


@pytest.fixture(scope="module")
def kubectl_bin() -> pathlib.Path:
    try:
        return binaries.locate(build=False) / "kubectl"
    except binaries.BinariesError as exc:
        if os.environ.get("KOOPER_REQUIRE_REALK8S"):
            pytest.fail(f"kubectl: {exc}", pytrace=False)
        pytest.skip(f"no kubectl (make kube-bins): {exc}")


@pytest.fixture(scope="module")
def emulated():
    with cluster.EmulatedCluster(crds=sorted((ROOT / "crds").glob("*.yaml"))) as api:
        yield api


@pytest.fixture(scope="module")
def kubectl(kubectl_bin, emulated, tmp_path_factory):
    home = tmp_path_factory.mktemp("kubectl")
    config = home / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
        "clusters": [{"name": "emulator", "cluster": {"server": emulated.url}}],
        "users": [{"name": "nobody", "user": {}}],
        "contexts": [{"name": "emulator",
                      "context": {"cluster": "emulator", "user": "nobody", "namespace": NS}}],
    }))

    def run(*args: str, input_text: str | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(kubectl_bin), "--kubeconfig", str(config), "--cache-dir", str(home / "cache"),
             *args], capture_output=True, text=True, input=input_text, timeout=60, check=False)
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    return run


def columns(output: str) -> list[list[str]]:
    """kubectl's table output split into cells (columns are separated by 2+ spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines() if line]


def test_apply_examples_validates_on_the_server_and_creates_every_object(kubectl):
    first = kubectl("apply", "-f", str(ROOT / "examples"))
    assert first.stderr == ""
    assert "service/kooper-demo-worker created" in first.stdout
    assert "statefulset.apps/kooper-demo-worker created" in first.stdout
    assert "workergroup.kooper.dev/demo created" in first.stdout
    assert first.stdout.count("connector.kooper.dev/") == 3
    again = kubectl("apply", "-f", str(ROOT / "examples"))
    assert again.stdout.count("unchanged") == 6


def test_an_unknown_field_is_refused_with_the_api_servers_message(kubectl):
    bad = (ROOT / "examples" / "00-workergroup.yaml").read_text().replace(
        "  protocol: compatible", "  protocoll: compatible")
    refused = kubectl("apply", "-f", "-", input_text=bad, check=False)
    assert refused.returncode != 0
    assert 'strict decoding error: unknown field "spec.protocoll"' in refused.stderr


def test_get_shows_the_crds_printer_columns(kubectl, emulated):
    kubectl("apply", "-f", str(ROOT / "examples"))
    emulated.patch("workergroups", "demo", {"status": {
        "members": {"count": 4}, "tasks": 16, "unassigned": 0, "protocol": "compatible",
        "rebalanceGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}]}},
        namespace=NS, subresource="status")
    emulated.patch("connectors", "warehouse-sink", {"status": {
        "running": 8, "conditions": [{"type": "Ready", "status": "True"}]}},
        namespace=NS, subresource="status")
    rows = columns(kubectl("get", "wg,kconn").stdout)
    assert rows[0] == ["NAME", "MEMBERS", "TASKS", "UNASSIGNED", "PROTOCOL", "GENERATION",
                       "DELAY", "READY", "AGE"]
    # DELAY is empty (no delay pending), so the cells after GENERATION are READY and AGE.
    assert rows[1][:7] == ["workergroup.kooper.dev/demo", "4", "16", "0", "compatible", "3",
                           "True"]
    assert ["NAME", "GROUP", "TASKS", "RUNNING", "STATE", "READY", "AGE"] in rows
    sink = next(r for r in rows if r[0] == "connector.kooper.dev/warehouse-sink")
    assert sink[:5] == ["connector.kooper.dev/warehouse-sink", "demo", "8", "8", "True"]


def test_core_kinds_resolve_by_plural_and_short_name(kubectl, emulated):
    emulated.create("configmaps", {"metadata": {"name": "kooper-worker-0"},
                                   "data": {"a": "1", "b": "2"}}, namespace=NS)
    emulated.create("pods", {"metadata": {"name": "worker-0"},
                             "spec": {"containers": [{"name": "w", "image": "kooper-worker"}]}},
                    namespace=NS)
    emulated.patch("pods", "worker-0", {"status": {"phase": "Running", "containerStatuses": [
        {"name": "w", "ready": True, "restartCount": 2, "state": {"running": {}}}]}},
        namespace=NS, subresource="status")
    assert columns(kubectl("get", "pods").stdout)[1][:4] == ["worker-0", "1/1", "Running", "2"]
    assert columns(kubectl("get", "cm", "kooper-worker-0").stdout)[1][:2] == [
        "kooper-worker-0", "2"]
    names = kubectl("get", "pods,cm,svc", "-o", "name").stdout.split()
    assert {"pod/worker-0", "configmap/kooper-worker-0"} <= set(names)


def test_get_events_lists_what_describe_shows(kubectl, emulated):
    kubectl("apply", "-f", str(ROOT / "examples" / "00-workergroup.yaml"))
    group = emulated.get("workergroups", "demo", namespace=NS)
    assert group is not None
    emulated.create("events", {
        "metadata": {"name": "demo.rebalanced"}, "type": "Normal", "reason": "Rebalanced",
        "message": "generation 3: 16 tasks on 4 members",
        "involvedObject": {"apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
                           "name": "demo", "namespace": NS,
                           "uid": group["metadata"]["uid"]}}, namespace=NS)
    rows = columns(kubectl("get", "events").stdout)
    assert rows[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert ["Normal", "Rebalanced", "workergroup/demo", "generation 3: 16 tasks on 4 members"] \
        in [r[1:] for r in rows]
    assert "generation 3: 16 tasks on 4 members" in kubectl("describe", "wg", "demo").stdout


def test_scale_label_patch_and_delete_work_on_custom_kinds(kubectl, emulated):
    kubectl("apply", "-f", str(ROOT / "examples"))
    kubectl("scale", "kconn", "warehouse-sink", "--replicas=12")
    kubectl("label", "wg", "demo", "team=data")
    kubectl("patch", "wg", "demo", "--type", "merge", "-p", '{"spec":{"clockSkewSeconds":3}}')
    group = emulated.get("workergroups", "demo", namespace=NS)
    assert group is not None
    assert (group["metadata"]["labels"]["team"], group["spec"]["clockSkewSeconds"]) == (
        "data", 3)
    sink = emulated.get("connectors", "warehouse-sink", namespace=NS)
    assert sink is not None
    assert sink["spec"]["tasksMax"] == 12
    kubectl("delete", "kconn", "orders-source")
    assert emulated.get("connectors", "orders-source", namespace=NS) is None
