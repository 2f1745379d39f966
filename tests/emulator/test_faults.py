"""Fault injection: 409 storms, watch disconnects, slow answers; bounded memory."""

import threading
import time

from tests.emulator import apiclient
from tests.emulator.apiclient import CM, CONN, WG

from kooper.emulator import cluster


def test_a_409_storm_fails_the_next_n_writes_to_one_kind_only(emulated, api):
    api.post(WG, {"metadata": {"name": "g"}, "spec": {}})
    emulated.fail_next_writes("workergroups", 3)
    assert emulated.pending_failures("workergroups") == 3
    answers = [api.merge(f"{WG}/g", {"spec": {"protocol": "eager"}}) for _ in range(3)]
    assert [status for status, _ in answers] == [409, 409, 409]
    assert answers[0][1]["reason"] == "Conflict"
    assert api.post(CM, {"metadata": {"name": "other-kind"}})[0] == 201
    assert api.get(f"{WG}/g")[0] == 200  # reads are not faulted
    assert api.merge(f"{WG}/g", {"spec": {"protocol": "eager"}})[0] == 200
    assert emulated.pending_failures() == 0


def test_an_injected_failure_can_target_any_kind_and_use_another_code(emulated, api):
    emulated.fail_next_writes(None, 1, code=503, verbs=["create"])
    status, body = api.post(CONN, {"metadata": {"name": "c"}, "spec": {}})
    assert status == 503
    assert body["reason"] == "ServiceUnavailable"
    assert api.post(CONN, {"metadata": {"name": "c"}, "spec": {}})[0] == 201


def test_direct_store_writes_are_never_faulted(emulated):
    emulated.fail_next_writes("configmaps", 1)
    assert emulated.create("configmaps", {"metadata": {"name": "a"}}, namespace="default")
    assert emulated.pending_failures("configmaps") == 1


def test_dropping_watches_ends_every_open_stream(emulated, api):
    results = []

    def reader():
        results.append(api.watch(f"{CM}?watch=true&timeoutSeconds=30", timeout=30))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while emulated.open_watches() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert emulated.drop_watches() == 2
    for thread in threads:
        thread.join(5)  # each stream ends at once; 30 s of timeoutSeconds would fail this
    assert results == [[], []]
    assert emulated.open_watches() == 0


def test_a_delay_slows_answers_for_one_kind(emulated, api):
    emulated.set_delay(0.3, "configmaps")
    started = time.monotonic()
    api.get(CM)
    assert time.monotonic() - started >= 0.3
    # Which kinds are delayed is read from the fault table, not timed: an upper bound on
    # an answer's time would fail on a busy machine.
    assert emulated.faults.delay_for(emulated.resolve("configmaps").key) == 0.3
    assert emulated.faults.delay_for(emulated.resolve("pods").key) == 0
    emulated.clear_faults()
    assert emulated.faults.delay_for(emulated.resolve("configmaps").key) == 0


def test_stored_events_and_kmock_request_log_stay_bounded():
    with cluster.EmulatedCluster(event_limit=5, request_log_limit=10) as small:
        api = apiclient.Api(small.url)
        for i in range(12):
            api.post("/api/v1/namespaces/default/events", {"metadata": {"name": f"e{i}"}})
        names = [e["metadata"]["name"] for e in small.list("events")]
        assert names == [f"e{i}" for i in range(7, 12)]
        for _ in range(30):
            api.get("/api/v1")
        assert len(small.handler._requests) <= 10


def test_request_counts_by_verb(emulated, api):
    api.post(CM, {"metadata": {"name": "a"}})
    api.get(CM)
    api.get(f"{CM}/a")
    api.merge(f"{CM}/a", {"data": {"x": "y"}})
    assert emulated.request_counts() == {"create": 1, "list": 1, "get": 1, "patch": 1}
