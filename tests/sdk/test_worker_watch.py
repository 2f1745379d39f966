"""The Worker against the emulator: watch delivery, reconnects, restarts, late starts, pauses."""

import statistics
import threading
import time

import pytest
from tests.sdk.worker_helpers import NS, POD, Running, assign, at_generation, report, wait_for

from kooper.core import events
from kooper.sdk import client, demo, kube

pytest.importorskip("kmock")
from kooper.emulator import cluster as emulated

# Nothing but the watch can deliver an assignment in time: the safety-net re-read runs
# once at start and then every hour, and the idle loop wakes once a minute.
WATCH_ONLY = client.Settings(
    lease_duration_s=5,
    renew_interval_s=0.5,
    tick_interval_s=60.0,
    resync_interval_s=3600.0,
    callback_timeout_s=1.0,
)


def joined_and_watching(cluster, running):
    wait_for(lambda: report(cluster), what="join")
    wait_for(lambda: cluster.open_watches("configmaps") == 1, what="the watch")
    wait_for(lambda: running.worker.watch.watches >= 1, what="the watch opened")


def test_assignments_are_delivered_by_the_watch_within_milliseconds(api):
    running = Running(api, settings=WATCH_ONLY, uid=api.pod_uid)
    latencies = []
    try:
        joined_and_watching(api, running)
        for generation in range(1, 11):
            written = time.monotonic()
            assign(api, generation, [], [f"A-{generation}"])
            accepted = wait_for(
                lambda g=generation: running.worker.accepted_at.get(g), timeout=5,
                what=f"generation {generation}",
            )
            latencies.append(accepted - written)
            print(f"generation {generation}: {1000 * (accepted - written):.1f} ms")
            wait_for(lambda g=generation: at_generation(api, g), what="applied")
    finally:
        running.close()
    # Delivered at all proves the watch (nothing else reads the ConfigMap in an hour);
    # the latencies (typically a few milliseconds) are printed, not asserted: speed is
    # measured by benchmarks, not by timers in tests.
    print(f"median {1000 * statistics.median(latencies):.1f} ms")
    assert running.worker.watch.lists == 1


def test_a_dropped_watch_resumes_from_its_version_and_misses_nothing(api):
    running = Running(api, settings=WATCH_ONLY, uid=api.pod_uid)
    try:
        joined_and_watching(api, running)
        opened = running.worker.watch.watches
        assert api.drop_watches("configmaps") == 1
        assign(api, 1, [], ["A-0"])  # written while no watch is open
        wait_for(lambda: at_generation(api, 1), timeout=5, what="gen 1 after the drop")
        # A late first safety-net re-read can deliver gen 1 while the watch still backs
        # off from the dropped stream: wait for the watch to be open again.
        wait_for(lambda: running.worker.watch.watches > opened, timeout=5, what="watch again")
        assert running.worker.watch.lists == 1  # resumed, not relisted
    finally:
        running.close()


def test_an_expired_version_makes_the_watch_relist():
    with emulated.EmulatedCluster(history_limit=10) as cluster:
        cluster.create("pods", {"metadata": {"name": POD}, "spec": {}}, namespace=NS)
        running = Running(cluster, settings=WATCH_ONLY)
        try:
            joined_and_watching(cluster, running)
            # Other ConfigMaps change (the watch's selector hides them, and the emulator
            # sends no bookmarks) until the watch's version falls out of the history.
            for i in range(15):
                cluster.create("configmaps", {"metadata": {"name": f"noise-{i}"}}, namespace=NS)
            cluster.drop_watches("configmaps")  # it resumes from that version: 410 Gone
            assign(cluster, 1, [], ["A-0"])
            wait_for(lambda: at_generation(cluster, 1), timeout=5, what="gen 1 after 410")
            # The worker's first safety-net re-read may come late (it waits for the first
            # turn of the loop that accepts assignments) and deliver gen 1 while the watch
            # thread still backs off from the dropped stream: wait for the watch itself.
            watch = running.worker.watch
            wait_for(lambda: watch.expired >= 1 and watch.lists >= 2,
                     what="the 410 and the relist")
        finally:
            running.close()


def test_a_failing_watch_backs_off_relists_and_recovers(api):
    running = Running(api, settings=WATCH_ONLY, uid=api.pod_uid)
    try:
        joined_and_watching(api, running)
        api.fail_next_writes("configmaps", 3, code=503, verbs=["watch"])
        api.drop_watches("configmaps")
        assign(api, 1, [], ["A-0"])
        wait_for(lambda: at_generation(api, 1), timeout=5, what="gen 1 after failures")
        wait_for(lambda: api.pending_failures("configmaps") == 0, what="every failure served")
        wait_for(lambda: api.open_watches("configmaps") == 1, what="watching again")
        assert running.worker.watch.lists >= 2
        assert "503" in running.worker.watch.last_error
    finally:
        running.close()


def test_the_safety_net_reread_delivers_when_the_watch_is_silent(api):
    settings = client.Settings(
        lease_duration_s=5, renew_interval_s=0.5, tick_interval_s=0.02, resync_interval_s=0.05
    )
    api.fail_next_writes("configmaps", 10_000, code=503, verbs=["watch"])
    running = Running(api, settings=settings, uid=api.pod_uid)
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, [], ["A-0"])
        wait_for(lambda: at_generation(api, 1), timeout=5, what="gen 1 by re-reading")
        assert api.open_watches("configmaps") == 0
    finally:
        running.close()
        api.clear_faults()


def test_a_higher_epoch_restarts_a_kept_resource_in_place(api):
    running = Running(api, settings=WATCH_ONLY, uid=api.pod_uid)
    try:
        joined_and_watching(api, running)
        assign(api, 1, ["A"], ["A-0"], epochs={"A": 1, "A-0": 1})
        wait_for(lambda: at_generation(api, 1), what="gen 1")
        assign(api, 2, ["A"], ["A-0"], epochs={"A": 1, "A-0": 2})
        got = wait_for(lambda: at_generation(api, 2), what="gen 2")
        assert got.owned.tasks == {"A-0"}
    finally:
        running.close()
    rows = [(e.event, e.resource, e.generation, e.epoch) for e in running.events]
    assert rows[:4] == [
        (events.Kind.START, "A", 1, 1),
        (events.Kind.START, "A-0", 1, 1),
        (events.Kind.STOP, "A-0", 2, 1),
        (events.Kind.START, "A-0", 2, 2),
    ]
    assert running.connectors.lost == []  # stopped with on_revoked: progress committed
    assert "A-0" in running.connectors.counted


def test_a_start_that_times_out_is_not_owned_and_is_stopped_when_it_returns(api):
    settings = client.Settings(
        lease_duration_s=5, renew_interval_s=0.5, tick_interval_s=0.02, callback_timeout_s=0.1
    )
    connectors = demo.DemoConnectors(start_ms=400)
    running = Running(api, settings=settings, uid=api.pod_uid, connectors=connectors)
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, [], ["A-0"])
        got = wait_for(lambda: at_generation(api, 1), what="gen 1")
        # (On a slow machine the late return may already be in this report too.)
        assert got.failed["A-0"].startswith("on_assigned timed out after 0.1s")
        assert not got.owned
        # The callback goes on and starts A-0 after 0.4 s; the worker then stops it.
        wait_for(lambda: connectors.lost == ["A-0"], what="the late start stopped")
        assert connectors.running() == frozenset()
        failed = wait_for(lambda: report(api).failed.get("A-0", "").endswith("as lost") and
                          report(api).failed["A-0"], what="the late stop reported")
        assert failed.startswith("on_assigned timed out after 0.1s; it returned late")
        assert not report(api).owned
        # A later generation may start it again (fast this time).
        connectors.start_ms = 0
        assign(api, 2, [], ["A-0"])
        got = wait_for(lambda: at_generation(api, 2), what="gen 2")
        assert got.owned.tasks == {"A-0"}
        assert got.failed == {}
    finally:
        running.close()
    # Never owned, so never in the event log until generation 2 started it.
    assert [(e.event, e.generation) for e in running.events if e.resource == "A-0"] == [
        (events.Kind.START, 2), (events.Kind.STOP, 2),
    ]


def test_a_late_start_after_the_worker_left_is_stopped_too(api):
    settings = client.Settings(
        lease_duration_s=5, renew_interval_s=0.5, tick_interval_s=0.02, callback_timeout_s=0.1
    )
    connectors = demo.DemoConnectors(start_ms=300)
    running = Running(api, settings=settings, uid=api.pod_uid, connectors=connectors)
    wait_for(lambda: report(api), what="join")
    assign(api, 1, [], ["A-0"])
    wait_for(lambda: at_generation(api, 1), what="gen 1")
    running.close()
    assert api.get("leases", f"kooper-{POD}", namespace=NS) is None
    wait_for(lambda: connectors.lost == ["A-0"], what="the orphan stopped")
    assert connectors.running() == frozenset()


def test_paused_connectors_stay_assigned_and_pause_then_resume(api):
    running = Running(api, settings=WATCH_ONLY, uid=api.pod_uid)
    connectors = running.connectors
    try:
        joined_and_watching(api, running)
        epochs = {"A": 1, "A-0": 1}
        assign(api, 1, ["A"], ["A-0"], epochs=epochs, states={"A": "paused"})
        got = wait_for(lambda: at_generation(api, 1), what="gen 1")
        assert got.owned.tasks == {"A-0"}
        assert connectors.paused() == {"A", "A-0"}
        assign(api, 2, ["A"], ["A-0"], epochs=epochs)
        wait_for(lambda: at_generation(api, 2), what="gen 2")
        assert connectors.paused() == frozenset()
        assert connectors.running() == {"A", "A-0"}
    finally:
        running.close()
    # One row per resource and flip, at the generation that flipped it and the epoch
    # it runs at; stopping a resumed resource needs no extra row.
    rows = [(e.event, e.resource, e.generation, e.epoch) for e in running.events]
    assert rows == [
        (events.Kind.START, "A", 1, 1),
        (events.Kind.START, "A-0", 1, 1),
        (events.Kind.PAUSE, "A", 1, 1),
        (events.Kind.PAUSE, "A-0", 1, 1),
        (events.Kind.RESUME, "A", 2, 1),
        (events.Kind.RESUME, "A-0", 2, 1),
        (events.Kind.STOP, "A", 2, 1),
        (events.Kind.STOP, "A-0", 2, 1),
    ]
    flips = [e for e in running.events if e.event in (events.Kind.PAUSE, events.Kind.RESUME)]
    assert {(e.run, e.group, e.member, e.protocol, e.policy) for e in flips} == {
        ("t", "demo", POD, "compatible", "kooper")
    }


class FailingPause(demo.DemoConnectors):
    def on_paused(self, resource):
        raise RuntimeError("cannot pause")


def test_a_failed_pause_is_reported_and_still_logged_so_the_resume_pairs_with_it(api):
    running = Running(api, settings=WATCH_ONLY, uid=api.pod_uid, connectors=FailingPause())
    try:
        joined_and_watching(api, running)
        assign(api, 1, [], ["A-0"], epochs={"A-0": 3}, states={"A": "paused"})
        got = wait_for(lambda: at_generation(api, 1), what="gen 1")
        assert got.failed == {"A-0": "on_paused raised RuntimeError: cannot pause"}
        assign(api, 2, [], ["A-0"], epochs={"A-0": 3})
        wait_for(lambda: at_generation(api, 2), what="gen 2")
    finally:
        running.close()
    rows = [(e.event, e.resource, e.generation, e.epoch) for e in running.events]
    assert rows == [
        (events.Kind.START, "A-0", 1, 3),
        (events.Kind.PAUSE, "A-0", 1, 3),
        (events.Kind.RESUME, "A-0", 2, 3),
        (events.Kind.STOP, "A-0", 2, 3),
    ]


def test_a_document_for_another_incarnation_is_ignored_until_one_for_ours(api, caplog):
    caplog.set_level("INFO", logger="kooper.worker")
    running = Running(api, settings=WATCH_ONLY, uid=api.pod_uid, incarnation="new")
    try:
        joined_and_watching(api, running)
        assign(api, 5, [], ["A-0"], incarnation="old")
        wait_for(lambda: "ignoring generation 5" in caplog.text, what="the old document seen")
        assert report(api).generation == -1
        assert running.connectors.running() == frozenset()
        assign(api, 6, [], ["A-1"], incarnation="new")
        got = wait_for(lambda: at_generation(api, 6), what="gen 6")
        assert got.owned.tasks == {"A-1"}
    finally:
        running.close()


def test_closing_a_watch_stream_from_another_thread_ends_a_blocked_read(api):
    stream = kube.Api(api.url).watch(
        kube.configmap_path(NS), query={"fieldSelector": "metadata.name=nothing"},
        read_timeout_s=30,
    )
    seen = []
    reader = threading.Thread(target=lambda: seen.extend(stream), daemon=True)
    reader.start()
    time.sleep(0.05)
    stream.close()
    reader.join(timeout=2)
    assert not reader.is_alive()
    assert seen == []


def test_a_watch_on_a_missing_kind_is_an_api_error(api):
    with pytest.raises(kube.ApiError) as caught:
        kube.Api(api.url).watch("/api/v1/namespaces/default/nothings", query={},
                                read_timeout_s=5)
    assert caught.value.status == 404
