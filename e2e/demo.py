"""The example group on a kind cluster: apply, reset, wait for balance, record a drill."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from e2e import invariants, recorder, tools
from kooper.control import views
from kooper.protocol import codec, messages

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "out" / "e2e"
GROUP = "demo"
STATEFULSET = "kooper-demo-worker"
POD_LABEL = ("app.kubernetes.io/name", "kooper-demo-worker")
BASELINE = {
    "protocol": "compatible",
    "policy": "kooper",
    "scheduledRebalanceMaxDelay": "30s",
    "leaseDurationSeconds": 15,
    "clockSkewSeconds": 5,
}
# The examples' worker args (probes need the health port; tests/demo checks they agree).
DEFAULT_ARGS = ["worker", "--demo", "--health-port", "8080",
                "--lease-duration", "15s", "--renew-interval", "5s"]
REPLICAS = 4
DRILL_LABEL = "kooper.dev/drill"
"""Labels what a drill added to the examples; ``Demo.baseline`` removes it."""


EVENTS_MOUNT = "/var/log/kooper-events"
"""Where each kind node mounts the host's events directory (hack/kind/cluster.sh)."""


def with_rows_on_the_host(pod_spec: dict[str, Any], args: list[str]) -> None:
    """Edit a worker pod template: ``args`` (with ``--events-dir``), the node's events
    directory mounted there, and one pod per worker node at most one apart."""
    container = pod_spec["containers"][0]
    container["args"] = args
    container.setdefault("volumeMounts", []).append({"name": "events", "mountPath": EVENTS_MOUNT})
    pod_spec.setdefault("volumes", []).append(
        {"name": "events", "hostPath": {"path": EVENTS_MOUNT, "type": "Directory"}})
    pod_spec["topologySpreadConstraints"] = [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "nodeTaintsPolicy": "Honor",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": dict([POD_LABEL])},
    }]


def is_member_pod(pod: dict[str, Any]) -> bool:
    return (pod["metadata"].get("labels") or {}).get(POD_LABEL[0]) == POD_LABEL[1]


class Demo:
    """The examples/ group in one namespace."""

    def __init__(self, kube: tools.Kube, namespace: str) -> None:
        self.kube = kube
        self.ns = namespace
        self.default_args = DEFAULT_ARGS + (
            ["--events-dir", EVENTS_MOUNT] if kube.events_dir is not None else [])

    def k(self, *args: str, timeout: float = 120) -> str:
        return self.kube.kubectl("-n", self.ns, *args, timeout=timeout)

    def json(self, *args: str) -> Any:
        return json.loads(self.k("get", *args, "-o", "json"))

    # --- setup ---------------------------------------------------------------

    def apply_examples(self) -> None:
        """examples/ as shipped; on kind, the workers also write their own rows to a
        hostPath (``--events-dir``) and spread evenly over the two worker nodes."""
        if self.kube.events_dir is None:
            self.k("apply", "-f", str(ROOT / "examples"))
            return
        documents = []
        for path in sorted((ROOT / "examples").glob("*.yaml")):
            documents.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
        for doc in documents:
            if doc["kind"] == "StatefulSet" and doc["metadata"]["name"] == STATEFULSET:
                with_rows_on_the_host(doc["spec"]["template"]["spec"], self.default_args)
        self.kube.kubectl("-n", self.ns, "apply", "-f", "-",
                          input_text=json.dumps({"apiVersion": "v1", "kind": "List",
                                                 "items": documents}))

    def patch_group(self, **spec: Any) -> None:
        self.k("patch", "workergroup", GROUP, "--type", "merge", "-p", json.dumps({"spec": spec}))

    def add_connector(self, name: str, *, tasks: int, **config: str) -> None:
        """A Connector of the drill's own (``baseline`` deletes it again)."""
        body = {"apiVersion": "kooper.dev/v1alpha1", "kind": "Connector",
                "metadata": {"name": name, "labels": {DRILL_LABEL: "true"}},
                "spec": {"workerGroup": GROUP, "tasksMax": tasks, "config": config}}
        self.kube.kubectl("-n", self.ns, "apply", "-f", "-", input_text=json.dumps(body))

    def worker_args(self) -> list[str]:
        sts = self.json("statefulset", STATEFULSET)
        args: list[str] = sts["spec"]["template"]["spec"]["containers"][0]["args"]
        return args

    def set_worker_args(self, args: list[str]) -> None:
        patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": args}]
        self.k("patch", "statefulset", STATEFULSET, "--type", "json", "-p", json.dumps(patch))

    def scale(self, replicas: int) -> None:
        self.k("scale", "statefulset", STATEFULSET, f"--replicas={replicas}")

    def rollout_status(self, kind: str = "statefulset", name: str = STATEFULSET) -> None:
        self.k("rollout", "status", f"{kind}/{name}", "--timeout=15m", timeout=960)

    def baseline(self) -> None:
        """The examples as shipped: 4 default workers, compatible/kooper, 30s delay; balanced."""
        self.apply_examples()
        self.k("delete", "connectors", "-l", DRILL_LABEL, "--wait=false")
        self.patch_group(**BASELINE)
        if self.worker_args() != self.default_args:
            self.set_worker_args(self.default_args)
        self.scale(REPLICAS)
        self.rollout_status()
        self.wait_balanced(REPLICAS)

    # --- observation ---------------------------------------------------------

    def expected(self) -> set[str]:
        """Every resource the Connectors ask for: the instances and their tasks."""
        out = set()
        for conn in self.json("connectors")["items"]:
            if views.connector_state(conn["spec"].get("state")) == "stopped":
                continue
            name = conn["metadata"]["name"]
            out.add(name)
            out.update(f"{name}-{n}" for n in range(conn["spec"].get("tasksMax", 1)))
        return out

    def reports(self) -> dict[str, messages.Report]:
        """What each live member pod's own worker reports (a replaced pod's Lease: not yet)."""
        leases = self.json("leases")["items"]
        return recorder.current_reports(leases, self.json("pods")["items"], is_member_pod)

    def group_status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.json("workergroup", GROUP).get("status") or {}
        return status

    def balanced(self, members: int) -> bool:
        """``members`` live members, each resource run once, tasks within one of even, and
        every member done with the generation the operator last wrote for it."""
        reports = self.reports()
        if len(reports) != members:
            return False
        written = self.assignments()
        if any(written.get(m) is None or written[m].generation != r.generation
               for m, r in reports.items()):
            return False  # a round in flight (a config change restarting work in place)
        owners: dict[str, int] = {}
        tasks = []
        for report in reports.values():
            owned = report.owned.sorted()
            tasks.append(sum(invariants.is_task(r) for r in owned))
            for resource in owned:
                owners[resource] = owners.get(resource, 0) + 1
        expected = self.expected()
        return (
            set(owners) == expected
            and all(n == 1 for n in owners.values())
            and max(tasks) - min(tasks) <= 1
        )

    def wait_balanced(self, members: int, *, timeout_s: float = 300) -> None:
        tools.wait_for(
            f"{members} members running every resource once, balanced",
            lambda: self.balanced(members),
            timeout_s=timeout_s,
            interval_s=1,
        )

    def assignments(self) -> dict[str, messages.Assignment]:
        """member -> the assignment document the operator last wrote for it."""
        out = {}
        for cm in self.json("configmaps", "-l", f"kooper.dev/group={GROUP}")["items"]:
            text = (cm.get("data") or {}).get(messages.CONFIGMAP_KEY)
            if text:
                document = codec.decode_assignment(text)
                out[document.member] = document
        return out

    def operator_pods(self) -> set[str]:
        """The operator's pods (the chart's Deployment ``kooper``), terminating ones too."""
        selector = "app.kubernetes.io/name=kooper,app.kubernetes.io/component=operator"
        return {p["metadata"]["name"] for p in self.json("pods", "-l", selector)["items"]}

    def operator_leader(self) -> str:
        """The holder of the operator's leader Lease: ``<pod>/<pid>`` ("" when nobody holds it)."""
        lease = self.json("lease", "kooper-operator-leader")
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def container_killer(self, pod: str) -> Callable[[], None]:
        """``kill -9`` of the pod's current container, as a crash or an OOM kill does (its
        kubelet restarts it), looked up now so that calling it is the kill alone.

        Not a pod deletion: the Pod object stays, so nothing is told to stop gracefully.
        On the local control plane the container is a process on this host
        (``kooper://<pid>``); on kind, ``crictl stop --timeout 0`` on the pod's node
        sends SIGKILL (PID 1 of a container cannot be SIGKILLed from inside it).
        """
        found = self.json("pod", pod)
        runtime, _, ident = str(found["status"]["containerStatuses"][0]["containerID"]).partition(
            "://")
        if runtime == "kooper":
            return lambda: os.kill(int(ident), signal.SIGKILL)
        node = found["spec"]["nodeName"]

        def crictl_stop() -> None:
            tools.run("docker", "exec", node, "crictl", "stop", "--timeout", "0", ident)
        return crictl_stop

    @contextlib.contextmanager
    def record(self, drill: str) -> Iterator[recorder.Recorder]:
        """Record the drill to out/e2e/<drill>.jsonl while the block runs."""
        spec = self.json("workergroup", GROUP)["spec"]
        observer = recorder.Observer(
            run=drill,
            group=GROUP,
            is_member_pod=is_member_pod,
            protocol=spec.get("protocol", ""),
            policy=spec.get("policy", ""),
        )
        rec = recorder.Recorder(
            observer,
            kubectl=lambda *a: self.kube.kubectl(*a, timeout=30),
            namespace=self.ns,
            path=OUT / f"{drill}.jsonl",
        )
        with rec:
            yield rec
