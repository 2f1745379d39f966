"""A blocking Worker on a thread against the emulator, and ways to read and write its documents."""

import dataclasses
import threading
import time

from tests.sdk import session_helpers

from kooper.core import events
from kooper.protocol import codec, messages
from kooper.sdk import client, demo, identity, kube

NS = "default"
POD = "workers-0"
FAST = client.Settings(
    lease_duration_s=2, renew_interval_s=0.2, tick_interval_s=0.02, callback_timeout_s=1.0
)


def wait_for(predicate, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


class Running:
    """A Worker on a thread, with its demo connectors and event log."""

    def __init__(self, cluster, settings=FAST, uid="", connectors=None, incarnation=None):
        self.connectors = connectors or demo.DemoConnectors()
        self.events: list[events.Event] = []
        self.worker = client.Worker(
            api=kube.Api(cluster.url, timeout_s=2.0),
            identity=identity.Identity(pod=POD, namespace=NS, uid=uid),
            on_assigned=self.connectors.on_assigned,
            on_revoked=self.connectors.on_revoked,
            on_lost=self.connectors.on_lost,
            on_paused=self.connectors.on_paused,
            on_resumed=self.connectors.on_resumed,
            settings=settings,
            on_event=self.events.append,
            run_id="t",
            incarnation=incarnation,
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.worker.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


def report(cluster):
    lease = cluster.get("leases", f"kooper-{POD}", namespace=NS)
    if lease is None:
        return None
    text = (lease["metadata"].get("annotations") or {}).get(messages.REPORT_ANNOTATION)
    return codec.decode_report(text) if text else None


def assign(
    cluster,
    generation,
    connectors=(),
    tasks=(),
    *,
    revoked=((), ()),
    protocol="compatible",
    epochs=None,
    states=None,
    incarnation="",
):
    message = dataclasses.replace(
        session_helpers.assignment(
            generation, connectors, tasks, revoked=revoked, protocol=protocol,
            epochs=epochs if epochs is not None else {r: generation for r in (*connectors, *tasks)},
            configs={"A": {"type": "counter"}}, name=POD, states=states, incarnation=incarnation,
        ),
        group="demo",
        policy="kooper",
    )
    body = {"metadata": {"name": f"kooper-{POD}"},
            "data": {messages.CONFIGMAP_KEY: codec.encode_assignment(message)}}
    if cluster.get("configmaps", f"kooper-{POD}", namespace=NS) is None:
        cluster.create("configmaps", body, namespace=NS)
    else:
        cluster.replace("configmaps", f"kooper-{POD}", body, namespace=NS)


def at_generation(cluster, generation):
    """The report once it is at ``generation`` (else None)."""
    got = report(cluster)
    return got if got is not None and got.generation == generation else None
