"""The real chaos test runs on the session's local control plane (``e2e.localcluster``)."""

from __future__ import annotations

import pytest
from e2e import localcluster

from kooper.controlplane import host


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> host.Handle:
    return localcluster.shared(request.config, tmp_path_factory)
