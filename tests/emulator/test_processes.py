"""Separate OS processes (like worker pods) talk to the emulator over plain HTTP."""

import subprocess
import sys
import textwrap

import pytest
from tests.emulator import apiclient

WORKER = textwrap.dedent("""\
    import json, sys, urllib.request
    base, name = sys.argv[1], sys.argv[2]
    metadata = {"name": "kooper-" + name, "labels": {"kooper.dev/member": name}}
    spec = {"holderIdentity": name + "/1", "leaseDurationSeconds": 30}
    body = json.dumps({"metadata": metadata, "spec": spec}).encode()
    request = urllib.request.Request(
        base + "/apis/coordination.k8s.io/v1/namespaces/default/leases", data=body,
        method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        print(json.loads(response.read())["metadata"]["resourceVersion"])
    """)


def test_worker_processes_create_leases_the_test_can_read(emulated):
    processes = [subprocess.Popen([sys.executable, "-c", WORKER, emulated.url, f"w-{i}"],
                                  stdout=subprocess.PIPE, text=True) for i in range(3)]
    versions = [int(p.communicate(timeout=30)[0]) for p in processes]
    assert all(p.returncode == 0 for p in processes)
    assert len(set(versions)) == 3
    leases = emulated.list("leases", namespace="default", label_selector="kooper.dev/member")
    assert sorted(lease["spec"]["holderIdentity"] for lease in leases) == [
        "w-0/1", "w-1/1", "w-2/1"]


def test_the_cluster_can_be_stopped_twice_and_restarted_with_its_objects(emulated):
    emulated.create("configmaps", {"metadata": {"name": "kept"}}, namespace="default")
    emulated.stop()
    emulated.stop()
    with pytest.raises(RuntimeError):
        emulated.url  # noqa: B018
    url = emulated.start()
    assert url.startswith("http://127.0.0.1:")
    status, body = apiclient.Api(url).get("/api/v1/namespaces/default/configmaps/kept")
    assert status == 200
    assert body["metadata"]["name"] == "kept"
