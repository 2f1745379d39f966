"""The blocking Worker against the in-process Kubernetes API emulator: Lease, ConfigMap, apply."""

import threading

import pytest
from tests.sdk.worker_helpers import NS, POD, Running, assign, report, wait_for

from kooper.core import events, model
from kooper.protocol import messages
from kooper.sdk import client, demo, identity, kube, session

pytest.importorskip("kmock")


def test_worker_creates_its_lease_owned_by_its_pod_and_reports(api):
    running = Running(api)
    try:
        first = wait_for(lambda: report(api), what="first report")
        lease = api.get("leases", f"kooper-{POD}", namespace=NS)
        assert lease["metadata"]["labels"] == {"kooper.dev/member": POD}
        (owner,) = lease["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", POD, api.pod_uid)
        assert lease["spec"]["holderIdentity"] == f"{POD}/{running.worker.incarnation}"
        assert lease["spec"]["leaseDurationSeconds"] == 2
        assert first.generation == -1
        assert first.incarnation == running.worker.incarnation
        renewed = lease["spec"]["renewTime"]
        wait_for(
            lambda: (
                api.get("leases", f"kooper-{POD}", namespace=NS)["spec"]["renewTime"] != renewed
            ),
            what="a renewal",
        )
    finally:
        running.close()
    assert api.get("leases", f"kooper-{POD}", namespace=NS) is None


def test_worker_applies_assignments_revokes_cooperatively_and_short_circuits_eager(api):
    running = Running(api, uid=api.pod_uid)
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, ["A"], ["A-0", "A-1"])
        got = wait_for(lambda: (r := report(api)) and r.generation == 1 and r, what="gen 1")
        assert got.owned == model.ConnectorsAndTasks.of(["A"], ["A-0", "A-1"])
        assert running.connectors.running() == {"A", "A-0", "A-1"}

        assign(api, 2, ["A"], ["A-1"], revoked=([], ["A-0"]))
        wait_for(lambda: report(api).generation == 2, what="gen 2")
        assert running.connectors.running() == {"A", "A-1"}
        assert running.connectors.lost == []
        assert "A-0" in running.connectors.counted

        assign(api, 3, [], [], revoked=(["A"], ["A-1"]), protocol="eager")
        wait_for(lambda: report(api).generation == 3, what="gen 3")
        assert sorted(running.connectors.lost) == ["A", "A-1"]
        assert not report(api).owned
    finally:
        running.close()
    kinds = [(e.event, e.resource, e.generation) for e in running.events]
    assert kinds[:3] == [(events.Kind.START, r, 1) for r in ("A", "A-0", "A-1")]
    assert (events.Kind.STOP, "A-0", 2) in kinds
    assert running.events[0].group == "demo"
    assert running.events[0].policy == "kooper"
    assert running.events[0].epoch == 1


def test_worker_ignores_a_malformed_assignment_and_keeps_serving(api):
    running = Running(api, uid=api.pod_uid)
    try:
        wait_for(lambda: report(api), what="join")
        bad = api.create(
            "configmaps",
            {
                "metadata": {"name": f"kooper-{POD}"},
                "data": {messages.CONFIGMAP_KEY: '{"version": 1}'},
            },
            namespace=NS,
        )
        # Read (and refused) by the worker: no sleep, the worker says it read that version.
        version = bad["metadata"]["resourceVersion"]
        wait_for(lambda: running.worker._configmap_version == version, what="the bad one read")
        assert report(api).generation == -1
        assign(api, 1, [], ["A-0"])
        wait_for(lambda: report(api).generation == 1, what="gen 1")
    finally:
        running.close()


def test_worker_fences_itself_when_it_cannot_renew_and_rejoins_fenced(api):
    running = Running(api, uid=api.pod_uid)
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, [], ["A-0"])
        wait_for(lambda: report(api).generation == 1, what="gen 1")
        api.fail_next_writes("leases", 10_000, code=503)
        wait_for(lambda: running.connectors.lost == ["A-0"], timeout=10, what="fencing")
        assert running.connectors.running() == frozenset()
        api.clear_faults()
        back = wait_for(lambda: (r := report(api)) and r.fenced and r, what="fenced report")
        assert not back.owned
        assign(api, 2, [], ["A-0"])
        wait_for(lambda: report(api).generation == 2 and not report(api).fenced, what="resume")
        assert running.connectors.running() == {"A-0"}
    finally:
        running.close()


def test_a_slow_callback_is_bounded_and_reported_as_failed(api):
    slow = client.Settings(
        lease_duration_s=5, renew_interval_s=0.2, tick_interval_s=0.02, callback_timeout_s=0.2
    )
    running = Running(api, settings=slow, uid=api.pod_uid)
    running.connectors.start_ms = 1_000
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, [], ["A-0"])
        got = wait_for(lambda: (r := report(api)) and r.generation == 1 and r, what="gen 1")
        assert got.failed["A-0"].startswith("on_assigned timed out after 0.2s")
        assert not got.owned
    finally:
        running.close()


def test_a_worker_without_pod_uid_looks_its_pod_up(api):
    worker = client.Worker(
        api=kube.Api(api.url),
        identity=identity.Identity(pod=POD, namespace=NS),
        on_assigned=lambda *a: None,
        on_revoked=lambda r: None,
        on_lost=lambda r: None,
    )
    assert worker._owner_uid() == api.pod_uid


def test_a_missing_pod_is_a_clear_identity_error(api):
    worker = client.Worker(
        api=kube.Api(api.url),
        identity=identity.Identity(pod="nobody", namespace=NS),
        on_assigned=lambda *a: None,
        on_revoked=lambda r: None,
        on_lost=lambda r: None,
    )
    with pytest.raises(identity.IdentityError, match="POD_UID"):
        worker._owner_uid()


def test_a_task_that_dies_by_itself_is_reported_failed_and_not_stopped(api):
    running = Running(api, uid=api.pod_uid)
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, ["A"], ["A-0", "A-1"])
        wait_for(lambda: report(api).generation == 1, what="gen 1")
        running.worker.task_failed("A-1", RuntimeError("consumer crashed"))
        got = wait_for(lambda: (r := report(api)) and r.failed and r, what="the failure")
        assert got.failed == {"A-1": "RuntimeError: consumer crashed"}
        assert got.failure_counts == {"A-1": 1}
        assert got.owned == model.ConnectorsAndTasks.of(["A"], ["A-0"])
        assert running.connectors.lost == []
        assert "A-1" not in running.connectors.counted  # no on_revoked either
    finally:
        running.close()


class Quiet:
    """Callbacks that do nothing (thousands of them run in a blink)."""

    def on_assigned(self, resource, config, epoch): ...
    def on_revoked(self, resource): ...
    def on_lost(self, resource): ...
    def on_paused(self, resource): ...
    def on_resumed(self, resource): ...
    def running(self):
        return set()


def test_a_report_too_large_to_write_does_not_end_the_worker(api):
    running = Running(api, uid=api.pod_uid, connectors=Quiet())
    try:
        wait_for(lambda: report(api), what="join")
        # 1,500 connector instances with 200-character names (about 310 KB): names do
        # not compress, the report cannot fit. Few enough callbacks for a busy machine.
        names = [f"connector-{n:05d}-{'x' * 184}" for n in range(1_500)]
        assign(api, 1, names)
        wait_for(lambda: len(running.worker.session.owned) == len(names), timeout=60,
                 what="all started")
        assert report(api).generation == -1  # the last report that could be written
        assign(api, 2, ["A"])
        wait_for(lambda: report(api).generation == 2, timeout=60, what="the worker goes on")
        assert report(api).owned == model.ConnectorsAndTasks.of(["A"], [])
    finally:
        running.close()


def test_a_stop_waits_for_a_pause_of_the_same_resource_that_outlived_its_timeout(api):
    # docs/sdk.md, "Order": two callbacks for the same resource never overlap. A pause that
    # times out is reported failed and its thread goes on; the stop that follows waits for it.
    settings = client.Settings(lease_duration_s=6, renew_interval_s=0.2, tick_interval_s=0.02,
                               callback_timeout_s=0.2, stop_timeout_s=3)
    gen2_written = threading.Event()
    revoked_began = threading.Event()
    pausing = threading.Event()
    overlaps = []

    class SlowToPause(demo.DemoConnectors):
        def on_paused(self, resource):
            pausing.set()
            try:
                gen2_written.wait(10)  # past its 0.2 s timeout
                # Returns as soon as the stop begins alongside it (the bug), else after 1 s.
                revoked_began.wait(1.0)
            finally:
                pausing.clear()

        def on_revoked(self, resource):
            revoked_began.set()
            if pausing.is_set():
                overlaps.append(resource)
            super().on_revoked(resource)

    running = Running(api, settings=settings, uid=api.pod_uid, connectors=SlowToPause())
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, [], ["A-0"], epochs={"A-0": 1}, states={"A": "paused"})
        got = wait_for(lambda: (r := report(api)) and r.generation == 1 and r, what="gen 1")
        assert got.failed["A-0"] == "on_paused timed out after 0.2s"
        assign(api, 2, [], [], revoked=((), ("A-0",)))
        gen2_written.set()
        got = wait_for(lambda: (r := report(api)) and r.generation == 2 and r, what="gen 2")
        assert not got.owned
        assert revoked_began.is_set()
        assert overlaps == []
    finally:
        gen2_written.set()
        running.close()


def test_readiness_is_answered_without_touching_the_session_the_main_loop_owns(
        api, monkeypatch):
    # The session is not thread-safe (its docstring): /readyz runs on the health server's
    # threads, so it answers from what the main loop last saw, as /metrics does. Reading the
    # report while the loop applied an assignment raised "dictionary changed size during
    # iteration" on the probe's thread.
    running = Running(api, uid=api.pod_uid)
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, [], ["A-0"])
        wait_for(lambda: (r := report(api)) and r.generation == 1, what="gen 1")
        readers = set()
        report_of = session.Session.report

        def watched_report(self):
            readers.add(threading.current_thread().name)
            return report_of(self)

        monkeypatch.setattr(session.Session, "report", watched_report)
        assert running.worker.ready
        assert threading.current_thread().name not in readers
    finally:
        running.close()
    assert not running.worker.ready  # left
