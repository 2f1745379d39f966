"""Rolling upgrades against eager and against their physical floor (issue 11), one run.

Every row of a table comes from this one run, so ratios are comparable:

1. The scripted rolling restart (each pod restarted in turn, no revisions), 10 pods,
   3 connectors x 10 tasks (33 resources), restarts 8-15 s: eager, kip415, kooper,
   kooper with delay 0.
2. Rollouts by the workload's controller (``sim.rollout``), whose revisions the
   operator sees: a StatefulSet ``RollingUpdate`` (one pod at a time), the same with
   ``partition`` 5 (half the pods never restart), and a Deployment with maxSurge 1,
   maxUnavailable 0; restarts 8-15 s, 1-3 s and sub-second (0.3-0.9 s, pod removal
   0.1-0.3 s). Per row: kooper's total pause / eager's (same shape, latencies, seed),
   / the floor, moves per resource against the minimum, the longest pause, and the
   pause of resources that started on pods the roll never restarted.

   The floor is measured in the same run: the mean handoff time observed in the
   kooper run (a resource's stop on one member to its start on the next) times the
   minimal number of handoffs for the shape: R for a surging Deployment (every
   resource moves once, onto an updated pod); R + 2R/N for a StatefulSet's full roll
   (the first pod's work has no updated peer and moves twice; the last pod comes
   back empty and takes its share back); R_rolled + R/N for a partial one (the first
   pod's work can go to a pod the roll leaves alone), R_rolled being what the rolled
   pods held.
3. 1,000 pods x 100,000 tasks (1,000 connectors x 100 tasks), restarts 8-15 s: a
   StatefulSet roll of the 5 highest ordinals (``partition`` 995), eager and kooper
   (eager stops all 101,000 resources several times per restart: ~40 s of CPU and
   1.2 GB for these 5 pods, so its full roll, hours of CPU, is not run);
   ``--full`` adds kooper's full 1,000-pod StatefulSet and Deployment rolls
   against their floors (without eager).

    .venv/bin/python benchmarks/bench_rollout.py [--seed 0] [--full]
    kooper drill rolling-restart --sim --pods 10 --connectors 3 --tasks 10 \\
        --workload statefulset|deployment [--partition 5] [--protocol eager]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import defaultdict

from kooper.core import events as ev
from kooper.core import model
from kooper.sim import metrics, rollout, runner, scenarios

P = model.Protocol
Q = model.Policy
SCRIPTED = (
    ("eager", P.EAGER, Q.KOOPER, None),
    ("compatible/kip415", P.COMPATIBLE, Q.KIP415, None),
    ("compatible/kooper (default)", P.COMPATIBLE, Q.KOOPER, None),
    ("compatible/kooper, delay 0", P.COMPATIBLE, Q.KOOPER, 0),
)
SPEEDS = (
    ("8-15 s", runner.Latencies()),
    ("1-3 s", runner.Latencies(restart=runner.Span(1_000, 3_000))),
    ("0.3-0.9 s", runner.Latencies(restart=runner.Span(300, 900),
                                   pod_removal=runner.Span(100, 300))),
)


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """A workload's rollout and the minimal handoffs it needs."""

    label: str
    spec: rollout.Spec


SHAPES = (
    Shape("StatefulSet", rollout.StatefulSetRoll()),
    Shape("StatefulSet, partition 5", rollout.StatefulSetRoll(partition=5)),
    Shape("Deployment, maxSurge 1", rollout.DeploymentRoll(max_surge=1, max_unavailable=0)),
)


@dataclasses.dataclass(frozen=True, slots=True)
class Measured:
    """One kooper run of a rollout, against eager and its floor."""

    pause_ms: int
    eager_ms: int | None
    handoff_ms: float
    minimal: float
    moves: int
    resources: int
    longest_ms: int
    never_restarted_ms: int

    @property
    def floor_ms(self) -> float:
        """The observed mean handoff times the minimal number of handoffs."""
        return self.handoff_ms * self.minimal


def handoffs(events: list[ev.Event]) -> list[int]:
    """Each move's handoff time: the resource's stop on one member to its start on another."""
    order = ev.SAME_INSTANT_ORDER
    last_start: dict[str, str] = {}
    last_stop: dict[str, int] = {}
    found: list[int] = []
    for event in sorted(events, key=lambda e: (e.ts_ms, order[e.event])):
        if event.event is ev.Kind.STOP:
            last_stop[event.resource] = event.ts_ms
        elif event.event is ev.Kind.START:
            before = last_start.get(event.resource)
            if before is not None and before != event.member and event.resource in last_stop:
                found.append(event.ts_ms - last_stop[event.resource])
            last_start[event.resource] = event.member
    return found


def placement_at(events: list[ev.Event], ts_ms: int) -> dict[str, str]:
    """resource → the member that last started it before ``ts_ms``."""
    where: dict[str, str] = {}
    for event in events:
        if event.event is ev.Kind.START and event.ts_ms < ts_ms:
            where[event.resource] = event.member
    return where


def pause_by_resource(events: list[ev.Event]) -> dict[str, int]:
    """Each resource's paused time from its first start to the end of the run."""
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (_, resource), _, start, end in metrics.intervals(events):
        spans[resource].append((start, end))
    end_ms = max(e.ts_ms for e in events)
    result: dict[str, int] = {}
    for resource, found in spans.items():
        found.sort()
        covered = 0
        reach = found[0][0]
        for start, end in found:
            if end > reach:
                covered += end - max(start, reach)
                reach = end
        result[resource] = (end_ms - found[0][0]) - covered
    return result


def minimal_handoffs(spec: rollout.Spec, *, pods: int, resources: int,
                     rolled_resources: int) -> float:
    """The fewest handoffs the shape allows (see the module docstring)."""
    if isinstance(spec, rollout.DeploymentRoll):
        return float(resources)
    if spec.partition > 0:
        return rolled_resources + resources / pods
    return rolled_resources + 2 * resources / pods


def measure(config: runner.Config, spec: rollout.Spec, *, eager: bool = True) -> Measured:
    """Kooper's run of ``spec`` (and eager's, unless ``eager`` is False)."""
    scenario = scenarios.build("rolling-restart", config.pods, spec)
    result = runner.simulate(config, scenario)
    if result.violations:
        raise SystemExit(f"violations: {result.violations[:3]}")
    events = result.events
    m = metrics.run_metrics(events)
    roll_ms = config.warmup_ms
    before = placement_at(events, roll_ms)
    restarted = {e.member for e in events if e.event is ev.Kind.LEAVE}
    never = {r for r, member in before.items() if member not in restarted}
    paused = pause_by_resource(events)
    times = handoffs(events)
    eager_ms = None
    if eager:
        eager_run = runner.simulate(dataclasses.replace(config, protocol=P.EAGER), scenario)
        eager_ms = metrics.run_metrics(eager_run.events).total_pause_ms
    return Measured(
        pause_ms=m.total_pause_ms, eager_ms=eager_ms,
        handoff_ms=sum(times) / len(times) if times else 0.0,
        minimal=minimal_handoffs(spec, pods=config.pods, resources=m.resources,
                                 rolled_resources=len(before) - len(never)),
        moves=m.moves, resources=m.resources, longest_ms=m.max_pause_ms,
        never_restarted_ms=sum(paused.get(r, 0) for r in never))


def row(label: str, speed: str, found: Measured) -> str:
    """One line of the rollout table."""
    ratio = f"{found.pause_ms / found.eager_ms:.4f}" if found.eager_ms else "-"
    eager = f"{found.eager_ms:,d}" if found.eager_ms is not None else "not run"
    return (f"| {label} | {speed} | {eager} | {found.pause_ms:,d} | {ratio} | "
            f"{found.floor_ms:,.0f} ({found.handoff_ms:,.0f} ms x {found.minimal:.1f}) | "
            f"{found.pause_ms / found.floor_ms:.2f} | "
            f"{found.moves / found.resources:.2f} (min {found.minimal / found.resources:.2f}) "
            f"| {found.longest_ms:,d} | {found.never_restarted_ms:,d} |")


HEADER = ("| rollout | restarts | eager pause ms | kooper pause ms | / eager | floor ms "
          "(mean handoff x handoffs) | / floor | moves per resource | longest pause ms | "
          "pause on pods never restarted ms |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")


def scripted(seed: int, pods: int) -> None:
    """Section 1: the scripted rolling restart, as issue 11 measured it first."""
    print(f"== 1. scripted rolling restart, {pods} pods, 3 connectors x 10 tasks "
          f"(33 resources), restarts 8-15 s, seed {seed}")
    print(f"  {'run':30s} {'total pause':>14s} {'ratio vs eager':>15s} {'moves':>6s} "
          f"{'moves/resource':>15s} {'max pause':>10s} {'overlaps':>8s}")
    eager = 0
    for label, protocol, policy, delay in SCRIPTED:
        config = runner.Config(pods=pods, connectors=3, tasks=10, protocol=protocol,
                               policy=policy, seed=seed)
        if delay is not None:
            config = dataclasses.replace(config, delay_ms=delay)
        result = runner.simulate(config, scenarios.rolling_restart(pods))
        m = metrics.run_metrics(result.events)
        if protocol is P.EAGER:
            eager = m.total_pause_ms
        print(f"  {label:30s} {m.total_pause_ms:>11,d} ms {m.total_pause_ms / eager:>15.4f} "
              f"{m.moves:>6d} {m.moves / m.resources:>15.2f} {m.max_pause_ms:>7,d} ms "
              f"{m.overlaps + len(result.violations):>8d}")


def rollouts(seed: int, pods: int) -> None:
    """Section 2: the workload's controller rolls the pods; the operator sees revisions."""
    print(f"\n== 2. rollouts by the workload's controller, {pods} pods, 3 connectors x 10 "
          f"tasks (33 resources), seed {seed}")
    print(HEADER)
    for shape in SHAPES:
        for speed, latencies in SPEEDS:
            config = runner.Config(pods=pods, connectors=3, tasks=10, seed=seed,
                                   latencies=latencies)
            print(row(shape.label, speed, measure(config, shape.spec)), flush=True)


def big(seed: int, *, full: bool) -> None:
    """Section 3: 1,000 pods x 100,000 tasks."""
    print(f"\n== 3. 1,000 pods x 100,000 tasks (1,000 connectors x 100 tasks), restarts "
          f"8-15 s, seed {seed}")
    print(HEADER)
    config = runner.Config(pods=1_000, connectors=1_000, tasks=100, seed=seed)
    cases: list[tuple[str, rollout.Spec, bool]] = [
        ("StatefulSet, partition 995 (5 pods)", rollout.StatefulSetRoll(partition=995), True)]
    if full:
        cases += [("StatefulSet", rollout.StatefulSetRoll(), False),
                  ("Deployment, maxSurge 1", rollout.DeploymentRoll(), False)]
    for label, spec, eager in cases:
        started = time.process_time()
        found = measure(config, spec, eager=eager)
        print(row(label, "8-15 s", found)
              + f" <!-- {time.process_time() - started:.0f} s CPU -->", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--full", action="store_true",
                        help="also kooper's full 1,000-pod rolls (minutes of CPU)")
    parser.add_argument("--no-big", action="store_true", help="skip the 1,000-pod section")
    args = parser.parse_args()
    scripted(args.seed, args.pods)
    rollouts(args.seed, args.pods)
    if not args.no_big:
        big(args.seed, full=args.full)


if __name__ == "__main__":
    main()
