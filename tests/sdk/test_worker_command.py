"""``kooper worker --demo`` as a process against the emulator: events, SIGTERM, Lease gone."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from kooper import cli
from kooper.core import events, model
from kooper.protocol import codec, messages

pytest.importorskip("kmock")
from kooper.emulator import cluster as emulated

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_worker_without_demo_is_a_usage_error(capsys):
    assert cli.main(["worker"]) == 1
    assert "--demo" in capsys.readouterr().err


def test_worker_rejects_unknown_protocols(capsys, monkeypatch):
    monkeypatch.setenv("POD_NAME", "w")
    monkeypatch.setenv("POD_NAMESPACE", "ns")
    assert cli.main(["worker", "--demo", "--protocols", "eager,sticky"]) == 1
    assert "--protocols" in capsys.readouterr().err


def test_worker_without_identity_explains_the_downward_api(capsys, monkeypatch):
    monkeypatch.delenv("POD_NAME", raising=False)
    assert cli.main(["worker", "--demo"]) == 1
    assert "POD_NAME is not set" in capsys.readouterr().err


def test_demo_worker_process_runs_assignments_logs_events_and_leaves_on_sigterm(tmp_path):
    with emulated.EmulatedCluster() as api:
        pod = api.create("pods", {"metadata": {"name": "w-0"}, "spec": {}}, namespace="default")
        env = dict(os.environ, KOOPER_KUBE_API=api.url, POD_NAME="w-0", POD_NAMESPACE="default",
                   POD_UID=pod["metadata"]["uid"], PYTHONPATH=str(ROOT / "operator"))
        events_file = tmp_path / "events.jsonl"
        process = subprocess.Popen(
            [sys.executable, "-m", "kooper.cli", "worker", "--demo", "--protocols", "eager",
             "--start-latency", "5ms", "--stop-latency", "5ms", "--lease-duration", "5s",
             "--renew-interval", "1s", "--tick-interval", "50ms", "--events-file", str(events_file),
             "--health-port", "0", "--run", "r1"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 20
            while api.get("leases", "kooper-w-0", namespace="default") is None:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            lease = api.get("leases", "kooper-w-0", namespace="default")
            report = codec.decode_report(lease["metadata"]["annotations"]["kooper.dev/report"])
            assert report.protocols == {model.Protocol.EAGER}
            assignment = messages.Assignment(
                group="demo", member="w-0", generation=1, protocol=model.Protocol.EAGER,
                assigned=model.ConnectorsAndTasks.of(["A"], ["A-0"]), epochs={"A-0": 7},
                configs={"A": {"type": "sleep"}}, policy="kip415",
            )
            data = {"assignment.json": codec.encode_assignment(assignment)}
            api.create("configmaps", {"metadata": {"name": "kooper-w-0"}, "data": data},
                       namespace="default")
            while not events_file.exists():
                assert time.monotonic() < deadline
                time.sleep(0.05)
            while len(events_file.read_text().splitlines()) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 0, err.decode()
        assert api.get("leases", "kooper-w-0", namespace="default") is None
    rows = list(events.load_lines(events_file.read_text().splitlines()))
    assert [(r.event, r.resource) for r in rows] == [
        (events.Kind.START, "A"), (events.Kind.START, "A-0"),
        (events.Kind.STOP, "A"), (events.Kind.STOP, "A-0"),
    ]
    assert rows[1].epoch == 7
    assert {(r.run, r.group, r.member, r.protocol, r.policy) for r in rows} == {
        ("r1", "demo", "w-0", "eager", "kip415")
    }
    stdout_rows = [json.loads(line) for line in out.decode().splitlines()]
    assert len(stdout_rows) == 4


def test_health_endpoint_answers_liveness_and_readiness():
    from kooper.sdk import health

    state = {"ready": False}
    server = health.serve(port=0, host="127.0.0.1", live=lambda: True,
                          ready=lambda: state["ready"])
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert urllib.request.urlopen(base + "/healthz").status == 200
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(base + "/readyz")
        assert caught.value.code == 503
        state["ready"] = True
        assert urllib.request.urlopen(base + "/readyz").status == 200
    finally:
        server.shutdown()


def worker_flags(*argv):
    import argparse

    from kooper.commands import worker

    parser = argparse.ArgumentParser()
    worker.add_arguments(parser)
    return worker.settings_from(parser.parse_args(["--demo", *argv]))


def test_worker_flags_set_the_tick_and_the_resync_safety_net():
    settings = worker_flags("--tick-interval", "250ms", "--resync-period", "12s")
    assert (settings.tick_interval_s, settings.resync_interval_s) == (0.25, 12.0)


def test_worker_durations_are_written_with_units_like_the_crds():
    settings = worker_flags("--lease-duration", "1m", "--renew-interval", "1.5s",
                            "--callback-timeout", "1m30s", "--stop-timeout", "10s",
                            "--fence-margin", "2s")
    assert (settings.lease_duration_s, settings.renew_interval_s, settings.callback_timeout_s,
            settings.stop_timeout_s, settings.fence_margin_s) == (60, 1.5, 90.0, 10.0, 2.0)


@pytest.mark.parametrize("argv", [["--lease-duration", "15"], ["--lease-duration", "1.5s"],
                                  ["--tick-interval", "0s"], ["--resync-period", "500us"],
                                  ["--tick-seconds", "1"], ["--poll-seconds", "0.2"]])
def test_a_bare_number_a_unit_below_ms_or_an_old_flag_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit):
        worker_flags(*argv)
    assert argv[0] in capsys.readouterr().err


def test_a_non_positive_resync_is_a_usage_error(capsys, monkeypatch):
    monkeypatch.setenv("POD_NAME", "w")
    monkeypatch.setenv("POD_NAMESPACE", "ns")
    assert cli.main(["worker", "--demo", "--resync-period", "0s"]) == 1
    assert "--resync-period" in capsys.readouterr().err


def test_a_stop_that_outlives_its_timeout_ends_the_worker_process_non_zero(tmp_path):
    # Lease 5 s: the stop timeout is a third of it (1.67 s); the demo task's stop takes
    # ten minutes. Counting it as stopped would leave it running with nobody owning it.
    with emulated.EmulatedCluster() as api:
        pod = api.create("pods", {"metadata": {"name": "w-0"}, "spec": {}}, namespace="default")
        env = dict(os.environ, KOOPER_KUBE_API=api.url, POD_NAME="w-0", POD_NAMESPACE="default",
                   POD_UID=pod["metadata"]["uid"], PYTHONPATH=str(ROOT / "operator"))
        events_file = tmp_path / "events.jsonl"
        process = subprocess.Popen(
            [sys.executable, "-m", "kooper.cli", "worker", "--demo", "--lease-duration", "5s",
             "--renew-interval", "1s", "--events-file", str(events_file)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )

        def write(generation, tasks):
            assignment = messages.Assignment(
                group="demo", member="w-0", generation=generation,
                protocol=model.Protocol.COMPATIBLE,
                assigned=model.ConnectorsAndTasks.of([], tasks),
                configs={"A": {"type": "counter", "stop.ms": "600000"}},
            )
            body = {"metadata": {"name": "kooper-w-0"},
                    "data": {"assignment.json": codec.encode_assignment(assignment)}}
            if generation == 1:
                api.create("configmaps", body, namespace="default")
            else:
                api.replace("configmaps", "kooper-w-0", body, namespace="default")

        try:
            deadline = time.monotonic() + 20
            while api.get("leases", "kooper-w-0", namespace="default") is None:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            write(1, ["A-0"])
            while not events_file.exists() or not events_file.read_text():
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            write(2, [])
            _, err = process.communicate(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 3, err.decode()
        assert "stopping A-0 did not finish" in err.decode()
        # It never reported A-0 stopped; its next incarnation takes the Lease over.
        lease = api.get("leases", "kooper-w-0", namespace="default")
        report = codec.decode_report(lease["metadata"]["annotations"]["kooper.dev/report"])
        assert report.owned.tasks == {"A-0"}
