"""The helm binary the kind tier builds (hack/kind/bins.sh) behaves as Helm's own release.

Helm's Makefile stamps the Kubernetes version of its client-go into the binary; a plain
``go install`` leaves Helm's fallback, Kubernetes 1.20. Such a helm refuses to render
this chart without a cluster (``kubeVersion: ">=1.30.0-0"``) and lints deprecations
against 1.20. The binary is built once and cached (seconds when warm).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest
import yaml
from tests.chart import conftest

BINS = conftest.ROOT / "hack" / "kind" / "bins.sh"


@pytest.fixture(scope="module")
def pinned_helm() -> pathlib.Path:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain to build the pinned helm (hack/kind/bins.sh tools)")
    done = subprocess.run(["bash", str(BINS), "tools"], capture_output=True, text=True,
                          timeout=1800, check=False)
    assert done.returncode == 0, done.stderr
    return pathlib.Path(done.stdout.strip()) / "helm"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_pinned_helm_renders_the_chart_without_a_cluster(pinned_helm):
    done = subprocess.run(
        [str(pinned_helm), "template", "kooper", str(conftest.CHART), "-n", conftest.NAMESPACE],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout) if d]
    assert "Deployment" in kinds
