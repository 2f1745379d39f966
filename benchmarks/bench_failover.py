"""Operator failover time: two replicas with leader election on the emulator; the leader
crashes (its Lease is left to expire) or stops cleanly (it releases the Lease); how long
until the standby holds the Lease and has planned a round from the persisted state.

    python benchmarks/bench_failover.py [--lease 15] [--renew 5]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import kopf

from kooper.emulator import cluster, kopfthread
from kooper.shell import handlers, leader, settings

ROOT = Path(__file__).resolve().parents[1]
NS = "default"


def replica(emulated: cluster.EmulatedCluster, name: str, lease: int, renew: float
            ) -> tuple[kopfthread.OperatorThread, object]:
    config = settings.Config(kube_api=emulated.url, identity=name, leader_election=True,
                             leader_namespace=NS, leader_lease_s=lease, leader_renew_s=renew)
    registry = kopf.OperatorRegistry()
    handlers.register(registry, login=False)
    memo = handlers.make_memo(config)
    thread = kopfthread.OperatorThread(emulated.url, registry=registry, memo=memo)
    thread.start(timeout=15)
    return thread, memo


def holder(emulated: cluster.EmulatedCluster) -> str:
    lease = emulated.get("coordination.k8s.io/v1/leases", leader.LEASE_NAME, namespace=NS) or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def wait(predicate: object, timeout: float = 120.0) -> float:
    started = time.monotonic()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() - started > timeout:
            raise TimeoutError
        time.sleep(0.05)
    return time.monotonic() - started


def measure(*, crash: bool, lease: int, renew: float) -> float:
    with cluster.EmulatedCluster(crds=sorted((ROOT / "crds").glob("*.yaml"))) as emulated:
        emulated.create("workergroups", {"metadata": {"name": "wg"}, "spec": {
            "selector": {"matchLabels": {"app": "w"}}}}, namespace=NS)
        a, memo_a = replica(emulated, "op-a", lease, renew)
        wait(lambda: holder(emulated) == "op-a")
        b, memo_b = replica(emulated, "op-b", lease, renew)
        wait(lambda: memo_b["shell"].elector.holder == "op-a")  # type: ignore[index]
        memo_a["shell"].elector.release_on_stop = not crash  # type: ignore[index]
        started = time.monotonic()
        a.stop(timeout=15)
        wait(lambda: any(r.steps_run for r in memo_b["shell"].runners.values()))  # type: ignore[index]
        took = time.monotonic() - started
        b.stop(timeout=15)
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lease", type=int, default=15, help="Lease duration, s (chart: 15)")
    parser.add_argument("--renew", type=float, default=5.0, help="renew interval, s (chart: 5)")
    args = parser.parse_args()
    for crash in (False, True):
        took = measure(crash=crash, lease=args.lease, renew=args.renew)
        print(f"{'leader crashes' if crash else 'leader stops'}: standby leads and ran a "
              f"round after {took:.1f} s (lease {args.lease} s, renew {args.renew} s)")


if __name__ == "__main__":
    main()
