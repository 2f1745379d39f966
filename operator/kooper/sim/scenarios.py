"""Drill scenarios as data: a list of steps the runner applies to a StatefulSet.

Pods are StatefulSet ordinals ``0..pods-1``. A step runs ``delay_ms`` after the
previous one ran, or, with ``wait_ready``, after the previous step's pod came
back and became ready (a scripted rolling restart).

A scenario with a ``rollout`` (``sim.rollout``) instead models the workload's own
controller: its ``ROLLOUT`` step changes the pod template, and the StatefulSet or
Deployment controller replaces the pods, with their revisions visible to the step.
"""

from __future__ import annotations

import dataclasses
import enum

from kooper.core import errors
from kooper.sim import rollout


class Action(enum.StrEnum):
    """What a step does."""

    RESTART = "restart"
    """Graceful restart (SIGTERM): the pod leaves, comes back as a new incarnation."""
    KILL = "kill"
    """Crash: the pod's tasks die at once, it comes back as a new incarnation."""
    SCALE_UP = "scale_up"
    """Add ``count`` pods with the next ordinals."""
    SCALE_DOWN = "scale_down"
    """Remove the ``count`` highest ordinals for good (known-permanent departure)."""
    OPERATOR_RESTART = "operator_restart"
    """The operator restarts (``mid_round``: crashing while writing a round's documents)."""
    PROTOCOL = "protocol"
    """The WorkerGroup's configured protocol flips (``protocols`` names the new one)."""
    FORCE_DELETE = "force_delete"
    """``kubectl delete pod --force --grace-period=0`` (a lost node): the pod and its Lease
    are gone at once and the pod is re-created under its name, while the old process runs
    on, cut off from the API, until it fences itself by its own timing budget (hard chaos
    only: ``sim.chaos.HardFaults``)."""
    PARTITION = "partition"
    """The pod loses the API for ``down_ms`` (it self-fences after the lease duration)."""
    ROLLOUT = "rollout"
    """The workload's template changes: its controller rolls the pods (``Scenario.rollout``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One disruption."""

    action: Action
    pod: int = -1
    """The ordinal; -1 for steps that do not name one."""
    delay_ms: int = 0
    wait_ready: bool = False
    down_ms: int | None = None
    """How long the pod stays away (else the latency model's restart time)."""
    count: int = 1
    protocols: str = ""
    """``eager`` or ``compatible``: what the restarted pod advertises, or the new protocol."""
    mid_round: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """A named list of steps; ``eager_only`` pods advertise only the eager protocol at first."""

    name: str
    steps: tuple[Step, ...]
    eager_only: bool = False
    rollout: rollout.Spec | None = None
    """The workload whose controller owns the pods (None: each pod its own owner)."""


def rolling_restart(pods: int, *, action: Action = Action.RESTART, protocols: str = "",
                    down_ms: int | None = None, spacing_ms: int | None = None,
                    only: int | None = None) -> Scenario:
    """Highest ordinal first, one at a time: wait for ready, or a fixed ``spacing_ms``.

    ``only`` restarts just that many pods (a partial roll leaves undisturbed pods).
    """
    first = pods - (pods if only is None else min(only, pods))
    steps = tuple(
        Step(action, pod=ordinal, wait_ready=spacing_ms is None and index > 0,
             delay_ms=0 if index == 0 or spacing_ms is None else spacing_ms,
             down_ms=down_ms, protocols=protocols)
        for index, ordinal in enumerate(range(pods - 1, first - 1, -1))
    )
    return Scenario("rolling-restart", steps)


def rolled(spec: rollout.Spec) -> Scenario:
    """The workload's controller rolls every pod to a new revision (``sim.rollout``)."""
    return Scenario("rolling-restart", (Step(Action.ROLLOUT),), rollout=spec)


def build(name: str, pods: int, workload: rollout.Spec | None = None) -> Scenario:
    """The scenario called ``name`` for a group of ``pods`` (a rolling restart of
    ``workload`` by its controller, if given)."""
    half = max(1, pods // 2)
    if name == "rolling-restart":
        return rolling_restart(pods) if workload is None else rolled(workload)
    if name == "kill-one":
        return Scenario(name, (Step(Action.KILL, pod=0),))
    if name == "kill-many":
        return Scenario(name, tuple(Step(Action.KILL, pod=p) for p in range(half)))
    if name == "scale-up":
        return Scenario(name, (Step(Action.SCALE_UP, count=half),))
    if name == "scale-down":
        return Scenario(name, (Step(Action.SCALE_DOWN, count=min(half, pods - 1)),))
    if name == "operator-restart":
        return Scenario(name, (
            Step(Action.KILL, pod=0),
            Step(Action.OPERATOR_RESTART, delay_ms=1_000),
        ))
    if name == "protocol-upgrade":
        roll = rolling_restart(pods, protocols="compatible")
        return Scenario(name, roll.steps, eager_only=True)
    if name == "flapping":
        return Scenario(name, tuple(
            Step(Action.KILL, pod=0, delay_ms=0 if i == 0 else 20_000, down_ms=5_000)
            for i in range(5)
        ))
    raise errors.KooperError(f"unknown scenario {name!r} (one of: {', '.join(NAMES)})")


NAMES = ("rolling-restart", "kill-one", "kill-many", "scale-up", "scale-down",
         "operator-restart", "protocol-upgrade", "flapping")
