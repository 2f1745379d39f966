"""A member cut off from the API server fences on time: its main loop never waits on the
network (found by the kind drill of a partitioned node, e2e/test_node_failure.py).

A request to an unreachable server blocks for the client's whole timeout. Here every
answer is delayed past that timeout (the emulator's delay: a partition, as the worker
sees it), with a timeout longer than the member's whole timing budget: a loop that
re-read its ConfigMap itself would sit in that read past the fence and past the end of
the budget, and end the process instead of stopping its work as lost.
"""

import threading

import pytest
from tests.sdk.worker_helpers import NS, POD, assign, at_generation, report, wait_for

from kooper.core import events
from kooper.sdk import client, demo, identity, kube

pytest.importorskip("kmock")

SETTINGS = client.Settings(
    lease_duration_s=2, renew_interval_s=0.2, tick_interval_s=0.02, callback_timeout_s=1.0,
    resync_interval_s=0.05,  # the re-read is always on its way when the partition starts
)
TIMEOUT_S = 4.0
"""The client's request timeout: longer than the whole budget (fence after 1.2 s, end
by 1.87 s of a 2 s lease)."""


def test_a_partitioned_member_fences_and_stops_its_work_as_lost_without_ending(api):
    connectors = demo.DemoConnectors()
    rows: list[events.Event] = []
    exits: list[int] = []
    worker = client.Worker(
        api=kube.Api(api.url, timeout_s=TIMEOUT_S),
        identity=identity.Identity(pod=POD, namespace=NS, uid=api.pod_uid),
        on_assigned=connectors.on_assigned,
        on_revoked=connectors.on_revoked,
        on_lost=connectors.on_lost,
        settings=SETTINGS,
        on_event=rows.append,
        exit_process=exits.append,
    )
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, [], ["A-0"])
        wait_for(lambda: at_generation(api, 1), what="generation 1 running")
        api.set_delay(3 * TIMEOUT_S)  # cut off: nothing answers in time
        wait_for(lambda: worker.session.report().fenced, timeout=10, what="the fence")
        wait_for(lambda: any(r.event is events.Kind.STOP for r in rows), what="A-0 stopped")
        assert exits == []
        assert [(r.event, r.resource) for r in rows] == [
            (events.Kind.START, "A-0"), (events.Kind.STOP, "A-0")]
    finally:
        api.clear_faults()
        stop.set()
        thread.join(timeout=3 * TIMEOUT_S)
    assert exits == []
