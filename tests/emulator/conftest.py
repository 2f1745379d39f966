"""Fixtures for the emulator tests: a running cluster and a tiny urllib client."""

import pytest
from tests.emulator import apiclient

from kooper.emulator import cluster


@pytest.fixture
def emulated():
    with cluster.EmulatedCluster() as emulated_cluster:
        yield emulated_cluster


@pytest.fixture
def api(emulated):
    return apiclient.Api(emulated.url)

