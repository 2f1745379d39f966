"""Worker metrics: a standard-library text exposition that Prometheus' own parser reads."""

import http.client
import math

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.sdk import session_helpers
from tests.sdk.session_helpers import assignment, drive, new_session
from tests.sdk.worker_helpers import Running, assign, report, wait_for

import kooper
from kooper.sdk import demo, health
from kooper.sdk import metrics as sdk_metrics


def parsed(text):
    """{sample name: {frozenset(labels): value}} through prometheus_client's parser."""
    samples = {}
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return samples, types


def value(samples, name, **labels):
    return samples[name][frozenset(labels.items())]


class Keeper:
    renewals = 7
    renewal_failures = 2


class Watch:
    failures = 3


def test_exposition_escapes_label_values_and_help_and_parses_back():
    family = sdk_metrics.Family(
        "kooper_worker_example", "gauge", 'help with \\ and\nnewline',
        (("kooper_worker_example", (("resource", 'a"b\\c\nd'), ("state", "running")), 1),),
    )
    text = sdk_metrics.exposition([family])
    assert text.endswith("\n")
    (got,) = text_string_to_metric_families(text)
    assert got.documentation == "help with \\ and\nnewline"
    (sample,) = got.samples
    assert sample.labels == {"resource": 'a"b\\c\nd', "state": "running"}
    assert sample.value == 1


def test_histogram_buckets_are_cumulative_with_sum_and_count():
    histogram = sdk_metrics.Histogram("kooper_worker_x_seconds", "x", label="callback",
                                      buckets=(0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 3.0):
        histogram.observe("on_assigned", seconds)
    samples, types = parsed(sdk_metrics.exposition([histogram.family()]))
    assert types == {"kooper_worker_x_seconds": "histogram"}
    bucket = samples["kooper_worker_x_seconds_bucket"]
    assert bucket[frozenset({("callback", "on_assigned"), ("le", "0.1")})] == 2  # le is <=
    assert bucket[frozenset({("callback", "on_assigned"), ("le", "1.0")})] == 3
    assert bucket[frozenset({("callback", "on_assigned"), ("le", "+Inf")})] == 4
    assert value(samples, "kooper_worker_x_seconds_count", callback="on_assigned") == 4
    assert math.isclose(value(samples, "kooper_worker_x_seconds_sum", callback="on_assigned"),
                        3.65)


def test_timed_callbacks_feed_the_start_and_stop_histograms_and_count_exceptions():
    ticks = iter([10.0, 10.25, 20.0, 21.5, 30.0, 30.5])
    worker_metrics = sdk_metrics.WorkerMetrics(clock=lambda: next(ticks))
    started = []
    start = worker_metrics.timed("on_assigned", lambda r, config, epoch: started.append(r))

    def failing(resource):
        raise RuntimeError("no")

    stop = worker_metrics.timed("on_lost", failing)
    revoke = worker_metrics.timed("on_revoked", lambda r: None)
    start("A-0", {}, 1)
    with pytest.raises(RuntimeError):
        stop("A-0")
    revoke("A-0")
    assert started == ["A-0"]
    samples, _ = parsed(worker_metrics.render())
    assert value(samples, "kooper_worker_start_duration_seconds_sum", callback="on_assigned") \
        == 0.25
    assert value(samples, "kooper_worker_stop_duration_seconds_sum", callback="on_lost") == 1.5
    assert value(samples, "kooper_worker_stop_duration_seconds_count", callback="on_revoked") \
        == 1
    assert value(samples, "kooper_worker_callback_exceptions_total", callback="on_lost") == 1
    # The callbacks that never raised are there at 0 (``timed`` and ``counted`` add them).
    assert samples["kooper_worker_callback_exceptions_total"] == {
        frozenset({("callback", "on_assigned")}): 0,
        frozenset({("callback", "on_lost")}): 1,
        frozenset({("callback", "on_revoked")}): 0,
    }


def test_a_callbacks_exception_counter_is_there_at_0_before_it_first_raises():
    # A series born at 1 hides its first step from increase() and rate(): the first
    # exception of a callback would never show on a dashboard or in an alert.
    worker_metrics = sdk_metrics.WorkerMetrics()
    worker_metrics.counted("on_paused", lambda resource: None)
    samples, _ = parsed(worker_metrics.render())
    assert value(samples, "kooper_worker_callback_exceptions_total", callback="on_paused") == 0


def test_observe_reports_per_resource_states_generation_and_fencing_of_a_session():
    session = new_session(lease_ms=30_000)
    session.lease_renewed(0)
    session.receive_assignment(assignment(
        1, ["A"], ["A-0", "A-1"], configs={"A": {}}, states={"A": "paused"}))
    drive(session, errors={("Start", "A-1"): "boom"})
    worker_metrics = sdk_metrics.WorkerMetrics()
    worker_metrics.observe(session, Keeper())
    samples, types = parsed(worker_metrics.render())

    assert value(samples, "kooper_worker_resources", kind="connector", state="paused") == 1
    assert value(samples, "kooper_worker_resources", kind="task", state="paused") == 1
    assert value(samples, "kooper_worker_resources", kind="task", state="failed") == 1
    assert value(samples, "kooper_worker_resources", kind="task", state="running") == 0
    assert len(samples["kooper_worker_resources"]) == 8  # 2 kinds x 4 states, always
    assert value(samples, "kooper_worker_assignment_generation") == 1
    assert value(samples, "kooper_worker_member_state", state=session.state.value) == 1
    assert sum(samples["kooper_worker_member_state"].values()) == 1
    assert value(samples, "kooper_worker_fenced") == 0
    assert value(samples, "kooper_worker_fencings_total") == 0
    assert value(samples, "kooper_worker_lease_renewals_total") == 7
    assert value(samples, "kooper_worker_lease_renewal_failures_total") == 2
    assert value(samples, "kooper_worker_build_info", version=kooper.__version__) == 1
    assert types["kooper_worker_fencings"] == "counter"  # the parser drops _total

    session.tick(30_000)  # the Lease went unrenewed for its duration
    drive(session)
    worker_metrics.observe(session, Keeper())
    samples, _ = parsed(worker_metrics.render())
    assert value(samples, "kooper_worker_fenced") == 1
    assert value(samples, "kooper_worker_fencings_total") == 1
    assert {dict(k)["kind"] + "/" + dict(k)["state"]
            for k, n in samples["kooper_worker_resources"].items() if n} == {"task/failed"}


def test_every_fencing_counts_even_when_the_member_never_recovered_in_between():
    session = new_session(lease_ms=1_000)
    session.lease_renewed(0)
    session.tick(1_000)
    session.lease_renewed(1_500)  # back, but no newer assignment yet: still fenced
    session.tick(2_500)
    assert session.fencings == 2


def test_health_server_serves_metrics_with_the_text_format_content_type():
    worker_metrics = sdk_metrics.WorkerMetrics()
    worker_metrics.observe(session_helpers.new_session())
    server = health.serve(port=0, host="127.0.0.1", live=lambda: True, ready=lambda: False,
                          metrics=worker_metrics.render)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        connection.request("GET", "/metrics")
        answer = connection.getresponse()
        body = answer.read().decode()
        assert answer.status == 200
        assert answer.getheader("Content-Type") == sdk_metrics.CONTENT_TYPE
        samples, _ = parsed(body)
        assert value(samples, "kooper_worker_assignment_generation") == -1
        connection.request("GET", "/readyz")
        assert connection.getresponse().status == 503
    finally:
        server.shutdown()
        server.server_close()


def test_health_server_without_metrics_answers_404_on_metrics():
    server = health.serve(port=0, host="127.0.0.1", live=lambda: True, ready=lambda: True)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        connection.request("GET", "/metrics")
        assert connection.getresponse().status == 404
    finally:
        server.shutdown()
        server.server_close()


def test_a_running_worker_exports_its_resources_renewals_and_start_durations(api):
    pytest.importorskip("kmock")
    running = Running(api, uid=api.pod_uid)
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, ["A"], ["A-0"])

        def applied():
            samples, _ = parsed(running.worker.metrics.render())
            return value(samples, "kooper_worker_assignment_generation") == 1 and samples

        samples = wait_for(applied, what="generation 1 in the metrics")
        assert value(samples, "kooper_worker_resources", kind="connector", state="running") == 1
        assert value(samples, "kooper_worker_resources", kind="task", state="running") == 1
        assert value(samples, "kooper_worker_start_duration_seconds_count",
                     callback="on_assigned") == 2
        wait_for(lambda: value(parsed(running.worker.metrics.render())[0],
                               "kooper_worker_lease_renewals_total") >= 1, what="a renewal")
    finally:
        running.close()
    samples, _ = parsed(running.worker.metrics.render())
    assert value(samples, "kooper_worker_stop_duration_seconds_count", callback="on_revoked") == 2


@pytest.mark.parametrize("tasks", [1, 10, 1000])
def test_the_number_of_series_does_not_grow_with_the_number_of_tasks(tasks):
    session = new_session(lease_ms=30_000)
    session.lease_renewed(0)
    session.receive_assignment(assignment(
        1, ["A"], [f"A-{n}" for n in range(tasks)], configs={"A": {}}))
    drive(session)
    worker_metrics = sdk_metrics.WorkerMetrics()
    worker_metrics.observe(session, Keeper())
    text = worker_metrics.render()
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(series) == SERIES_OF_ONE_MEMBER
    samples, _ = parsed(text)
    assert value(samples, "kooper_worker_resources", kind="task", state="running") == tasks


SERIES_OF_ONE_MEMBER = len([
    line for line in sdk_metrics.WorkerMetrics().render().splitlines()
    if line and not line.startswith("#")])
"""A fresh worker's series: a worker with work has exactly as many."""


def test_a_pause_or_resume_that_raises_counts_as_a_callback_exception(api):
    # docs/sdk.md: kooper_worker_callback_exceptions_total counts "callbacks that raised",
    # by callback; on_paused and on_resumed are callbacks like the others.
    pytest.importorskip("kmock")

    class Unpausable(demo.DemoConnectors):
        def on_paused(self, resource):
            raise RuntimeError(f"cannot pause {resource}")

        def on_resumed(self, resource):
            raise RuntimeError(f"cannot resume {resource}")

    running = Running(api, uid=api.pod_uid, connectors=Unpausable())
    try:
        wait_for(lambda: report(api), what="join")
        assign(api, 1, [], ["A-0"], epochs={"A-0": 1}, states={"A": "paused"})
        wait_for(lambda: (r := report(api)) and r.generation == 1, what="generation 1")
        assign(api, 2, [], ["A-0"], epochs={"A-0": 1})
        wait_for(lambda: (r := report(api)) and r.generation == 2, what="generation 2")
        samples = wait_for(lambda: parsed(running.worker.metrics.render())[0],
                           what="a scrape")
        assert samples["kooper_worker_callback_exceptions_total"] == {
            frozenset({("callback", "on_assigned")}): 0,
            frozenset({("callback", "on_revoked")}): 0,
            frozenset({("callback", "on_lost")}): 0,
            frozenset({("callback", "on_paused")}): 1,
            frozenset({("callback", "on_resumed")}): 1,
        }
    finally:
        running.close()


def test_failures_of_the_assignment_watch_are_counted():
    """A watch of the member's ConfigMap that keeps failing (RBAC without the watch verb,
    an API server that refuses watches) left the worker on the periodic re-read, every 30 s
    by default, with nothing but a log line to say so."""
    session = new_session(lease_ms=30_000)
    worker_metrics = sdk_metrics.WorkerMetrics()
    worker_metrics.observe(session, Keeper(), Watch())
    samples, types = parsed(worker_metrics.render())
    assert value(samples, "kooper_worker_assignment_watch_failures_total") == 3
    assert types["kooper_worker_assignment_watch_failures"] == "counter"
