"""examples/ drive the SDK's demo connectors, on the embedded cluster with the real operator."""

import pathlib
import socket
import urllib.request

import pytest
import yaml

from kooper.demo import cluster, drill, pods, recorder
from kooper.sdk import demo
from kooper.sim import metrics

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load_examples():
    return [doc for path in sorted(EXAMPLES.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def of_kind(kind):
    return [doc for doc in load_examples() if doc["kind"] == kind]


class ReadKeys(dict):
    """A config mapping that remembers which keys were read."""

    def __init__(self, data):
        super().__init__(data)
        self.read = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


@pytest.mark.parametrize("connector", of_kind("Connector"), ids=lambda c: c["metadata"]["name"])
def test_every_example_config_key_is_read_by_the_demo_connectors_and_sets_their_timing(
        connector):
    config = connector["spec"]["config"]
    slept = []
    connectors = demo.DemoConnectors(start_ms=1, stop_ms=1, sleep=slept.append)
    for resource in (connector["metadata"]["name"], f"{connector['metadata']['name']}-0"):
        seen = ReadKeys(config)
        connectors.on_assigned(resource, seen, 1)
        connectors.on_revoked(resource)
        assert set(config) - seen.read == set()  # no key the demo connectors ignore
    assert config["type"] in demo.DemoConnectors.TYPES
    start, stop = int(config["start.ms"]) / 1000, int(config["stop.ms"]) / 1000
    assert slept == [start, stop, start, stop]


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def probe(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return answer.status
    except OSError:
        return None


def test_the_examples_run_on_the_embedded_cluster_with_probes_and_configured_latencies(
        tmp_path):
    (group,) = of_kind("WorkerGroup")
    (sts,) = of_kind("StatefulSet")
    connectors = of_kind("Connector")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    args = list(container["args"])
    assert args[0] == "worker"
    health = {p["name"]: p["containerPort"] for p in container["ports"]}["health"]
    replicas = sts["spec"]["replicas"]
    ports = free_ports(replicas)

    def args_for(ordinal):
        # Every pod has its own IP in a cluster; here they share 127.0.0.1.
        own = [str(ports[ordinal]) if a == str(health) else a for a in args[1:]]
        return (*own, "--tick-interval", "200ms")

    wanted = sum(1 + c["spec"]["tasksMax"] for c in connectors)
    with cluster.EmbeddedCluster(workdir=tmp_path) as embedded:
        runner = pods.PodRunner(embedded.api, workdir=tmp_path, replicas=replicas,
                                set_name=sts["metadata"]["name"],
                                app_label=sts["spec"]["selector"]["matchLabels"][pods.WORKER_LABEL],
                                worker_args_for=args_for)
        try:
            for obj in (group, *connectors):
                embedded.create(obj["kind"].lower() + "s", obj)
            runner.create_statefulset(sts)
            for ordinal in range(replicas):
                runner.start_pod(ordinal)
            drill.wait_converged(runner, embedded, expected=wanted, settle_s=0.5, timeout_s=90,
                                 balanced=True)
            for ordinal, port in enumerate(ports):
                live = container["livenessProbe"]["httpGet"]["path"]
                ready = container["readinessProbe"]["httpGet"]["path"]
                assert (probe(port, live), probe(port, ready)) == (200, 200), ordinal
            last = runner.pods[runner.pod_name(replicas - 1)]
            sigterm_ms = drill.now_ms()
            running = metrics.running(recorder.read_rows(last.events_file), at_ms=sigterm_ms)
            stopped = runner.stop_pod(replicas - 1)
        finally:
            runner.shutdown()
    assert stopped == pods.Stopped(name=last.name, returncode=0, graceful=True)
    # (Stops before the SIGTERM were revocations while the group formed.)
    stops = {r.resource: r.ts_ms - sigterm_ms for r in recorder.read_rows(last.events_file)
             if r.event == "stop" and r.ts_ms >= sigterm_ms}
    assert set(stops) == {resource for _, resource in running}
    assert stops
    # Each graceful stop took at least its connector's stop.ms (the worker default is 0).
    stop_ms = {c["metadata"]["name"]: int(c["spec"]["config"]["stop.ms"]) for c in connectors}
    for resource, took in stops.items():
        connector = resource if resource in stop_ms else resource.rsplit("-", 1)[0]
        assert took >= stop_ms[connector], (resource, took)


def test_the_kind_drills_reset_workers_to_the_example_args():
    from e2e import demo as e2e_demo

    (sts,) = of_kind("StatefulSet")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["args"] == e2e_demo.DEFAULT_ARGS
