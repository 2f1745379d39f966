"""A pod stopped the kubelet's way, with the real operator and the real worker (~15 s)."""

import json
import sys

import pytest
from tests.demo import formed

from kooper.demo import drill, pods, recorder
from kooper.protocol import codec, messages
from kooper.sim import metrics

# A Lease that would take five minutes to expire, and a scheduled-rebalance delay of
# five minutes: whatever happens faster is the worker's own graceful leave, handed off
# at once as a planned departure, not an expiry or a departure judged unplanned.
SETTINGS = drill.Settings(pods=2, connectors=(("orders-source", 2),), max_delay_s=300,
                          lease_s=300, start_ms=100, stop_ms=200)


def audit_rows(embedded):
    return [json.loads(line) for line in embedded.audit_log.read_text().splitlines()
            if line.startswith("{")]


# The second run debounces for 2 s: the round after the pod starts terminating sees its
# Lease and the pod gone together, and only the Lease's last version (the DELETED event)
# tells that the worker left rather than a force-deleted pod whose Lease was collected.
DEBOUNCES = {"default": (), "coalesced": ("--debounce", "2")}


@pytest.mark.parametrize("debounce", sorted(DEBOUNCES))
def test_a_stopped_pod_stops_its_work_releases_its_lease_and_the_operator_moves_the_work(
        tmp_path, debounce):
    seen = []

    def listen(_rv, spec, kind, obj, _old):
        if spec.plural in ("pods", "leases") and obj["metadata"]["name"].endswith("workers-1"):
            seen.append((kind, spec.plural, obj))

    command = (sys.executable, "-m", "kooper.cli", "run", *DEBOUNCES[debounce])
    with formed.group(tmp_path, SETTINGS, run="leave", operator_command=command) as (
            embedded, runner):
        before = metrics.running(recorder.read_rows(runner.pods["workers-1"].events_file),
                                 at_ms=drill.now_ms())
        assert before, "both members run something (3 resources over 2 members)"
        embedded.api.store.subscribe(listen)
        sigterm_ms = drill.now_ms()
        stopped = runner.stop_pod(1)
        embedded.api.store.unsubscribe(listen)
        assert stopped == pods.Stopped(name="workers-1", returncode=0, graceful=True)
        # The operator reassigns at once (a planned departure: no delay, no Lease expiry).
        drill.wait_converged(runner, embedded, expected=SETTINGS.resources, settle_s=0.5,
                             timeout_s=60)
        leaves = [r for r in audit_rows(embedded)
                  if r["event"] == "leave" and r["member"] == "workers-1"]

    # Kubelet order: terminating Pod, then the worker's last report owning nothing and
    # its own Lease deletion, then the Pod object goes.
    kinds = [(kind, plural) for kind, plural, _ in seen]
    terminating = next(i for i, (_, plural, obj) in enumerate(seen)
                       if plural == "pods" and obj["metadata"].get("deletionTimestamp"))
    lease_gone = kinds.index(("DELETED", "leases"))
    assert terminating < lease_gone < kinds.index(("DELETED", "pods"))
    last_lease = seen[lease_gone][2]
    report = codec.decode_report(last_lease["metadata"]["annotations"][
        messages.REPORT_ANNOTATION])
    assert len(report.owned) == 0
    assert report.left
    assert len(leaves) == 1
    # Everything the worker ran it stopped itself before exiting, and nothing ran twice,
    # by the workers' own rows (the operator's leave rows would end a member's runs
    # where the operator thought they ended).
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None,
                            run="leave", group="demo", protocol="compatible", policy="kooper")
    # (Stops before the SIGTERM were revocations while the group formed.)
    stopped_then = {r.resource for r in rows
                    if r.member == "workers-1" and r.event == "stop" and r.ts_ms >= sigterm_ms}
    assert stopped_then == {key[1] for key in before}
    assert metrics.run_metrics(rows).overlaps == 0
