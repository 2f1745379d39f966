"""The Dockerfile: two targets, non-root, a pinnable base, only what each role needs."""

from __future__ import annotations

import re

from tests.chart import conftest

DOCKERFILE = (conftest.ROOT / "Dockerfile").read_text()


def test_operator_and_worker_targets_exist_and_operator_is_the_default():
    targets = [
        name for _, name in re.findall(r"^FROM\s+(\S+)\s+AS\s+(\S+)", DOCKERFILE, flags=re.M)
    ]
    assert {"operator", "worker"} <= set(targets)
    assert targets[-1] == "operator"


def test_base_image_is_one_argument_documented_for_pinning_by_digest():
    assert re.search(r"^ARG PYTHON_BASE=python:3\.11-slim", DOCKERFILE, flags=re.M)
    froms = re.findall(r"^FROM\s+(\S+)", DOCKERFILE, flags=re.M)
    assert all(f.startswith(("${PYTHON_BASE}", "build-", "runtime")) for f in froms), froms
    assert "@sha256:<" in DOCKERFILE
    assert "imagetools inspect" in DOCKERFILE
    assert "Pinning the base image" in (conftest.ROOT / "docs" / "install.md").read_text()


def test_images_run_as_the_charts_non_root_uid():
    assert re.search(r"^USER 10001:10001$", DOCKERFILE, flags=re.M)
    assert "runAsUser: 10001" in (conftest.CHART / "values.yaml").read_text()


def test_worker_installs_plain_kooper_and_operator_installs_the_operator_extra():
    worker = DOCKERFILE.split("AS build-worker", 1)[1].split("FROM", 1)[0]
    operator = DOCKERFILE.split("AS build-operator", 1)[1].split("FROM", 1)[0]
    assert "pip install --no-compile ." in worker
    assert "[operator]" not in worker
    # the build fails if the operator's client libraries or pyspark sneak in
    assert "'kopf', 'kubernetes', 'aiohttp', 'pyspark'" in worker
    assert '".[operator]"' in operator


def test_dockerignore_sends_only_the_package_to_the_build():
    lines = (conftest.ROOT / ".dockerignore").read_text().split()
    assert lines[lines.index("*")] == "*"
    assert {"!pyproject.toml", "!README.md", "!operator/"} <= set(lines)
