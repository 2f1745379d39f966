"""An older commit's operator beside this tree's, for the side-by-side benchmarks
(``bench_assignor_vs.py``, ``bench_writes.py``)."""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Sequence

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


def run(tree: pathlib.Path, arguments: Sequence[str], *, echo: bool = True) -> str:
    """``python arguments...`` with ``tree``'s ``operator/`` first on the path: its standard
    output (copied to standard error with ``echo``); exits with its error if it fails."""
    env = {**os.environ, "PYTHONPATH": str(tree / "operator")}
    done = subprocess.run([sys.executable, *arguments], env=env, capture_output=True,
                          text=True, check=False)
    if echo:
        sys.stderr.write(done.stdout)
    if done.returncode:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{arguments[0]} on {tree} failed ({done.returncode})")
    return done.stdout
