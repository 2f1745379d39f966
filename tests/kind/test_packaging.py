"""The operator extra is what `kooper run` needs, and the operator image proves it."""

from __future__ import annotations

import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def names(requirements):
    return {re.split(r"[<>=\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_operator_extra_pulls_no_demo_or_analytics_package():
    extras = PROJECT["optional-dependencies"]
    assert names(extras["operator"]).isdisjoint({"kmock", "matplotlib", "pyspark", "pandas"})
    assert "pyyaml" in names(extras["operator"])  # shell/credentials.py reads kubeconfigs
    assert {"kmock", "matplotlib"} <= names(extras["demo"])


def test_the_operator_image_build_fails_if_they_sneak_in():
    dockerfile = (ROOT / "Dockerfile").read_text()
    stage = dockerfile.split("AS build-operator", 1)[1].split("FROM", 1)[0]
    assert "'kmock', 'matplotlib', 'pyspark'" in stage


def test_the_image_builds_without_a_registry_frontend():
    assert not re.search(r"^#\s*syntax=", (ROOT / "Dockerfile").read_text(), flags=re.M)
