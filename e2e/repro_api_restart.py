"""Repro of an api-restart finding, fixed since (docs/benchmarks.md, "Restart faults"):
both operator replicas stopped working after an 8 s kube-apiserver outage.

One local control plane, two ``kooper run --leader-election`` replicas and four demo
workers (``leaders.Replicas``); a worker is SIGKILLed and kube-apiserver with it
(``leaders.restart``, point ``before-round``), down 8 s, restarted. It prints
``survived`` (the group converged again) or ``HUNG`` (no replica wrote the leader
Lease within ``leaders.TAKEOVER_S``); a hung replica still alive is sent SIGABRT, and
its log ends with every thread's Python stack (``PYTHONFAULTHANDLER``).

    PYTHONPATH=operator:. python -m e2e.repro_api_restart [--attempts 2] [--down 8]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
from collections.abc import Sequence

from e2e import chaos_real, leaders
from kooper.controlplane import binaries, host


def main(argv: Sequence[str] | None = None) -> int:
    """Run until a hang or ``--attempts`` survivals; exit 1 on a hang."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--down", type=float, default=8.0, help="seconds down (default 8)")
    parser.add_argument("--out", type=pathlib.Path,
                        default=pathlib.Path("out") / "repro-api-restart")
    args = parser.parse_args(argv)
    os.environ["PYTHONFAULTHANDLER"] = "1"  # the replicas inherit it: SIGABRT dumps stacks
    state = args.out.resolve() / "cluster"
    host.clean(state)
    handle = host.start(state, bin_dir=binaries.locate(build=False))
    try:
        for attempt in range(args.attempts):
            h = leaders.Replicas(chaos_real.Settings(), args.out.resolve() / f"run-{attempt}",
                                 cluster=handle)
            with h:
                h.wait_converged(after_ms=chaos_real.now_ms(), timeout_s=180)
                h.wait("a leader", h.leader, leaders.TAKEOVER_S)
                drawn = leaders.Drawn(["before-round", args.down])
                try:
                    step = leaders.restart(h, "api-restart", 1, drawn)
                except TimeoutError as exc:
                    print(f"{attempt} HUNG: {exc}", flush=True)
                    for name, process in h.operators.items():
                        alive = process.poll() is None
                        state_of = "alive (SIGABRT: stacks in its log)" if alive else "exited"
                        print(f"  {name}: {state_of}", flush=True)
                        if alive:
                            os.kill(process.pid, signal.SIGABRT)
                            process.wait()
                    return 1
                print(f"{attempt} survived: leader {step.leaders[0]} -> {step.leaders[1]}, "
                      f"whole {step.converge_s:.1f} s after the restart", flush=True)
    finally:
        handle.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
