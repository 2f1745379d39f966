"""An older commit's operator beside this tree's, for the side-by-side benchmarks
(``bench_assignor_vs.py``, ``bench_writes.py``)."""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]


def head() -> str:
    """This tree's commit, short."""
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()


@contextlib.contextmanager
def older(commit: str) -> Iterator[pathlib.Path]:
    """A temporary tree holding ``commit``'s ``operator/`` (``git archive``), removed after."""
    with tempfile.TemporaryDirectory(prefix="kooper-base-") as tmp:
        base = pathlib.Path(tmp)
        archive = base / "operator.tar"
        subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), commit,
                        "operator"], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(base, filter="data")
        yield base
