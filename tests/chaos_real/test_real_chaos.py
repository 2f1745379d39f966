"""Issue 12 with real parts: ``kooper run`` and ``kooper worker --demo`` processes under faults,
on a real kube-apiserver behind the fault proxy.

One group (4 worker processes, 2 connectors, 8 resources) goes through every fault
family once, each to convergence: a worker SIGKILLed; a worker SIGKILLed and the
operator SIGKILLed mid-round (restarted as a new process); bursts of HTTP 500 and 429
on every write while a worker dies; a slow API (every answer held 0.5 s) while a worker
dies; a worker frozen (SIGSTOP) until the operator declared it departed, then thawed;
the same with the operator SIGKILLed while the worker is frozen (the new operator
times the expiry from its own observations); and a worker frozen until its work was
started elsewhere, then thawed. The invariants
come from the workers' own rows and the harness's process rows (e2e/chaos_log.py),
never from the operator's audit log. The API is the session's local control plane
(real kube-apiserver, etcd and kube-controller-manager) seen through the fault proxy
(e2e/fault_proxy.py), which counts what it injected: the tests also check that the
bursts and the slow API really happened to the operator's and the workers' requests,
and that every client an error was served to wrote successfully afterwards. How the
faults are made: e2e/chaos_real.py and docs/sdk.md ("Chaos with real processes"); the
same scenario on the emulator: ``benchmarks/bench_chaos_real.py --backend emulator``.
"""

from __future__ import annotations

import functools

import pytest
from e2e import chaos_log, chaos_real, fault_proxy, realplane

from kooper.core import events
from kooper.sdk import client

pytestmark = [pytest.mark.chaos_real, pytest.mark.realk8s, pytest.mark.timeout(900)]

SETTINGS = chaos_real.Settings()
SCENARIO = (("worker-sigkill", 0), ("operator-sigkill", 1), ("api-500", 2), ("api-429", 3),
            ("slow-api", 0), ("frozen-worker", 1), ("frozen-operator-sigkill", 3),
            ("frozen-past-delay", 2))


@pytest.fixture(scope="module")
def run(cluster, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("chaos-real")
    plane = functools.partial(realplane.RealPlane, cluster)
    with chaos_real.Harness(SETTINGS, workdir, plane=plane) as h:
        h.wait_converged(after_ms=chaos_real.now_ms(), timeout_s=180)
        steps = [chaos_real.inject(h, fault, ordinal) for fault, ordinal in SCENARIO]
        yield h, chaos_real.check(h, steps)


@pytest.fixture(scope="module")
def exchanges(run) -> list[fault_proxy.Exchange]:
    h, _ = run
    return h.plane.proxy.history()


def test_every_fault_family_ran_against_real_processes(run):
    h, report = run
    assert [s.fault for s in report.steps] == [f for f, _ in SCENARIO]
    processes = h.processes()
    assert {p.what for p in processes} >= {"spawn", "sigkill", "sigstop", "sigcont", "exit"}
    assert h.operator_starts == 3  # the first operator process and one after each SIGKILL


def test_no_resource_ran_on_two_members_that_were_not_frozen(run):
    _, report = run
    assert report.double_ownership == 0, report.describe()


def test_nothing_is_lost_or_extra_after_quiescence(run):
    _, report = run
    assert (report.lost, report.unexpected) == ([], []), report.describe()


def test_per_task_epochs_grow_whenever_a_resource_starts_on_another_process(run):
    _, report = run
    assert report.epoch_regressions == [], report.describe()


def test_no_worker_goes_back_to_an_older_assignment_generation(run):
    _, report = run
    assert report.generation_regressions == [], report.describe()


def test_every_fault_converges_within_the_stated_bound(run):
    _, report = run
    assert report.late == [], report.describe()
    assert all(0 <= s.converge_s <= SETTINGS.bound_s for s in report.steps)


def test_the_overlap_check_counts_a_frozen_worker_as_running_what_it_ran(run):
    # Frozen past the delay, its work was started elsewhere while it could not run a
    # line of code: the check reports that, naming the frozen incarnation, and it is
    # fenced by the per-task epoch (the successor's is higher).
    h, report = run
    processes = h.processes()
    frozen = [p.incarnation for p in processes if p.what == "sigstop"]
    assert len(frozen) == 3
    past_delay = frozen[-1]
    assert report.overlaps, "a takeover while frozen must show up as an overlap"
    assert report.frozen_overlaps == report.overlaps
    assert {o.frozen for o in report.overlaps} == {(past_delay,)}
    assert all(chaos_log.while_frozen(o, processes) for o in report.overlaps)
    assert report.frozen_runs >= len(report.overlaps)


def test_a_thawed_worker_ends_itself_and_starts_nothing_after_the_thaw(run):
    h, _ = run
    processes = h.processes()
    rows = h.worker_rows()
    for incarnation in {p.incarnation for p in processes if p.what == "sigstop"}:
        thawed = chaos_log.thawed_at(incarnation, processes)
        assert thawed is not None
        [code] = [p.code for p in processes if p.incarnation == incarnation and p.what == "exit"]
        assert code == client.STUCK_EXIT_CODE, incarnation
        assert not [r for r in rows[incarnation]
                    if r.event is events.Kind.START and r.ts_ms >= thawed], incarnation


def test_the_api_was_a_real_kube_apiserver_reached_through_the_proxy(run, exchanges):
    h, _ = run
    assert h.plane.name == "real"
    clients = {e.client for e in exchanges}
    assert realplane.OPERATOR in clients
    assert {f"workers-{i}" for i in range(SETTINGS.pods)} <= clients
    assert any(e.watch and e.status == 200 for e in exchanges if e.client != realplane.OPERATOR)


@pytest.mark.parametrize("code", [500, 429])
def test_every_injected_error_was_served_and_its_client_wrote_successfully_after_it(
        exchanges, code):
    served = [i for i, e in enumerate(exchanges) if e.injected and e.status == code]
    assert len(served) == chaos_real.BURST
    assert all(exchanges[i].write for i in served)
    for who in {exchanges[i].client for i in served}:
        last = max(i for i in served if exchanges[i].client == who)
        assert any(e.client == who and e.write and 200 <= e.status < 300
                   for e in exchanges[last + 1:]), f"{who} never wrote after its {code}s"


def test_the_bursts_hit_workers_and_the_slow_api_held_writes_and_watches(exchanges):
    injected = {e.client for e in exchanges if e.injected}
    assert injected - {realplane.OPERATOR}, "no worker met an injected error"
    held = [e for e in exchanges if e.held]
    assert any(e.write for e in held)
    assert any(e.watch for e in held)
