"""``kooper cluster up|down|status``: a real local Kubernetes control plane.

``up`` starts etcd, kube-apiserver, kube-controller-manager (built from
Kubernetes' Go modules by ``make kube-bins``) and a kubelet stand-in that runs
pods as local processes, in the background, and prints the kubeconfig to use;
``down`` stops it (pods get their grace period) and removes its state.
"""

from __future__ import annotations

import argparse
import os
import pathlib

from kooper.commands import options
from kooper.controlplane import host

HELP = "start or stop a real local Kubernetes control plane (pods run as processes)"


def default_dir() -> pathlib.Path:
    """``$XDG_STATE_HOME/kooper/cluster`` (``~/.local/state/kooper/cluster``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return pathlib.Path(base) / "kooper" / "cluster"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kooper cluster``."""
    parser.add_argument("action", choices=("up", "down", "status"),
                        help="up: start it in the background (or show the running one); "
                        "down: stop it and remove its state; status: show it (exit 1: none)")
    parser.add_argument("--dir", type=pathlib.Path, default=default_dir(),
                        help="the cluster's state directory (default: %(default)s)")
    parser.add_argument("--timeout", type=options.non_negative_float, default=300.0,
                        help="seconds to wait for the cluster to be ready")


def _describe(handle: host.Handle) -> str:
    return (f"local cluster at {handle.server} (pid {handle.pid})\n"
            f"  export KUBECONFIG={handle.kubeconfig}\n"
            f"  export PATH={handle.bin_dir}:$PATH   # kubectl {handle.bin_dir / 'kubectl'}\n")


def run(args: argparse.Namespace) -> int:
    """Bring the cluster up, take it down, or say whether it runs."""
    state_dir: pathlib.Path = args.dir.expanduser().resolve()
    running = host.read_handle(state_dir)
    if args.action == "status":
        print(_describe(running) if running else f"no local cluster in {state_dir}", end="")
        return 0 if running else 1
    if args.action == "down":
        if running is None:
            print(f"no local cluster in {state_dir}")
            return 0
        running.stop(timeout_s=args.timeout)
        host.clean(state_dir)  # what a killed host could not remove itself
        print(f"stopped the local cluster in {state_dir}")
        return 0
    if running is not None:
        print(_describe(running), end="")
        return 0
    handle = host.start(state_dir, detach=True, timeout_s=args.timeout)
    print(_describe(handle), end="")
    return 0
