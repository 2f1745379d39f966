"""What `pip install kooper[operator]` resolves to, from the package index: what `kooper run`
needs and nothing only the demo or the analytics need. Plain `kooper` (the worker) pulls
nothing at all."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NEVER_IN_THE_OPERATOR = {"kmock", "matplotlib", "pyspark", "pandas", "pyarrow"}


def resolved(extra: str) -> set[str]:
    """The distributions pip would install for ``kooper[extra]`` into an empty environment."""
    target = f"{ROOT}[{extra}]" if extra else str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", "-", "--disable-pip-version-check", target],
        capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(f"pip could not resolve kooper[{extra}]: {done.stderr.strip()[-500:]}")
    report = json.loads(done.stdout)
    return {item["metadata"]["name"].lower() for item in report["install"]}


def test_the_operator_extra_is_what_kooper_run_needs_and_nothing_of_the_demo():
    names = resolved("operator")
    names = {name.replace("_", "-") for name in names}
    assert {"kopf", "kubernetes", "prometheus-client", "aiohttp", "pyyaml"} <= names
    assert not names & NEVER_IN_THE_OPERATOR, names & NEVER_IN_THE_OPERATOR


def test_the_worker_installs_kooper_alone():
    assert resolved("") == {"kooper"}
