"""The emulated cluster with the worker's Pod, for the blocking Worker's tests."""

import pytest
from tests.sdk.worker_helpers import NS, POD


@pytest.fixture
def api():
    pytest.importorskip("kmock")
    from kooper.emulator import cluster as emulated

    with emulated.EmulatedCluster() as cluster:
        pod = cluster.create("pods", {"metadata": {"name": POD}, "spec": {}}, namespace=NS)
        cluster.pod_uid = pod["metadata"]["uid"]
        yield cluster
