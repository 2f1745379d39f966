"""Where the control plane's binaries are: the cache ``make kube-bins`` fills.

``KOOPER_KUBE_BIN_DIR`` names a directory holding kube-apiserver,
kube-controller-manager, kubectl and etcd; otherwise ``hack/kube/build.sh``
of this source tree builds them (a no-op when cached) and says where they are.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

from kooper.core import errors

BIN_DIR_ENV = "KOOPER_KUBE_BIN_DIR"
NAMES = ("kube-apiserver", "kube-controller-manager", "kubectl", "etcd")


class BinariesError(errors.KooperError):
    """The control plane's binaries are missing and cannot be built here."""


def build_script() -> pathlib.Path:
    """``hack/kube/build.sh`` of the source tree this package runs from."""
    return pathlib.Path(__file__).resolve().parents[3] / "hack" / "kube" / "build.sh"


def locate(*, build: bool = True) -> pathlib.Path:
    """The directory holding every binary; builds them first when allowed and needed."""
    given = os.environ.get(BIN_DIR_ENV)
    if given:
        directory = pathlib.Path(given)
        missing = [n for n in NAMES if not (directory / n).is_file()]
        if missing:
            raise BinariesError(f"{BIN_DIR_ENV}={given} lacks {', '.join(missing)}")
        return directory
    script = build_script()
    if not script.is_file():
        raise BinariesError(f"set {BIN_DIR_ENV}: no {script} to build the binaries with")
    args = ["bash", str(script)] + ([] if build else ["--check"])
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        hint = "" if build else " (run `make kube-bins`)"
        raise BinariesError(f"the control plane's binaries are not available{hint}: {tail}")
    return pathlib.Path(done.stdout.strip().splitlines()[-1])
