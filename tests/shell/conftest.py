"""Fixtures: the emulated cluster with the project's CRDs, and the real kopf operator."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from tests.shell import doubles

from kooper.emulator import cluster, kopfthread
from kooper.shell import handlers, settings

ROOT = Path(__file__).resolve().parents[2]
NS = "default"
LABELS = {"app": "workers"}


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


class Operator:
    """Start/stop the real operator (handlers on a fresh registry) against the cluster."""

    def __init__(self, emulated: cluster.EmulatedCluster, **config: Any) -> None:
        self.emulated = emulated
        values = {"identity": "test-operator", "debounce_s": 0.05, "retry_s": 0.3, **config}
        self.config = settings.Config(kube_api=emulated.url, **values)
        self.thread: kopfthread.OperatorThread | None = None
        self.memo: Any = None

    def start(self) -> Operator:
        registry = kopf.OperatorRegistry()
        handlers.register(registry, login=False)
        self.memo = handlers.make_memo(self.config)
        self.thread = kopfthread.OperatorThread(self.emulated.url, registry=registry,
                                                memo=self.memo)
        self.thread.start(timeout=15)
        return self

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.stop(timeout=15)
            self.thread = None

    @property
    def shell(self) -> Any:
        return self.memo["shell"]

    def quiet_after(self, rounds: int = 1, name: str = "wg", *,
                    counter: str = "rounds_planned") -> Any:
        """Wait until the group's runner planned ``rounds`` rounds (or ran that many steps,
        with ``counter="steps_run"``) and has nothing queued (no poke pending, no
        Connector status in flight); returns the runner."""

        def quiet() -> Any:
            runner = self.shell.runners.get((NS, name))
            if runner is None or getattr(runner, counter) < rounds:
                return None
            if runner.flag.is_set() or runner.patching_connectors:
                return None
            return runner

        return wait_for(quiet, what=f"{rounds} planned round(s) of {name}, then quiet")


@pytest.fixture
def emulated() -> Iterator[cluster.EmulatedCluster]:
    with cluster.EmulatedCluster(crds=sorted((ROOT / "crds").glob("*.yaml"))) as emulated:
        yield emulated


@pytest.fixture
def operator(emulated: cluster.EmulatedCluster) -> Iterator[Operator]:
    op = Operator(emulated)
    op.start()
    try:
        yield op
    finally:
        op.stop()


@pytest.fixture
def fleet(emulated: cluster.EmulatedCluster) -> Iterator[doubles.Fleet]:
    with doubles.Fleet(emulated, labels=LABELS, lease_seconds=3) as fleet:
        yield fleet
    assert not fleet.violations, fleet.violations[:5]


def make_group(emulated: cluster.EmulatedCluster, name: str = "wg", *, delay: str = "3s",
               protocol: str = "compatible", policy: str = "kooper", labels: dict[str, str]
               | None = None, lease: int = 5, skew: int = 0) -> dict[str, Any]:
    return emulated.create("workergroups", {
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels or LABELS}, "protocol": protocol,
                 "policy": policy, "scheduledRebalanceMaxDelay": delay,
                 "leaseDurationSeconds": lease, "clockSkewSeconds": skew},
    }, namespace=NS)


def make_connector(emulated: cluster.EmulatedCluster, name: str, tasks: int, *,
                   group: str = "wg", state: str = "Running") -> dict[str, Any]:
    return emulated.create("connectors", {
        "metadata": {"name": name},
        "spec": {"workerGroup": group, "tasksMax": tasks, "state": state,
                 "config": {"topic": name.lower()}},
    }, namespace=NS)


def group_status(emulated: cluster.EmulatedCluster, name: str = "wg") -> dict[str, Any]:
    body = emulated.get("workergroups", name, namespace=NS) or {}
    return body.get("status") or {}


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    for item in status.get("conditions") or ():
        if item.get("type") == kind:
            return item
    return {}


def events(emulated: cluster.EmulatedCluster, reason: str | None = None) -> list[dict[str, Any]]:
    found = emulated.list("v1/events", namespace=NS)
    return [e for e in found if reason is None or e.get("reason") == reason]


def settled(fleet: doubles.Fleet, emulated: cluster.EmulatedCluster, *, resources: int,
            members: int, name: str = "wg") -> bool:
    """Every resource run by exactly one member, every member applied the latest generation."""
    owned = fleet.owned()
    if len(owned) != members:
        return False
    total = sum(len(r) for r in owned.values())
    status = group_status(emulated, name)
    if status.get("members", {}).get("count") != members:
        return False
    if total != resources or status.get("unassigned", -1) != 0:
        return False
    generation = status.get("rebalanceGeneration")
    return condition(status, "Ready").get("status") == "True" and all(
        m.generation <= (generation or 0) for m in fleet.members.values()
    )


def make_deployment(emulated: cluster.EmulatedCluster, name: str = "kooper") -> dict[str, Any]:
    """A Deployment (the operator's, as an owner of what it makes at run time)."""
    return emulated.create("apps/v1/deployments", {
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "operator", "image": "k"}]}}}},
        namespace=NS)
