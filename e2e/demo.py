"""The example group on a kind cluster: apply, reset, wait for balance, record a drill."""

from __future__ import annotations

import contextlib
import json
import pathlib
from collections.abc import Iterator
from typing import Any

from e2e import invariants, recorder, tools
from kooper.core import errors as kooper_errors
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
                "--lease-seconds", "15", "--renew-seconds", "5"]
REPLICAS = 4


def is_member_pod(pod: dict[str, Any]) -> bool:
    return (pod["metadata"].get("labels") or {}).get(POD_LABEL[0]) == POD_LABEL[1]


class Demo:
    """The examples/ group in one namespace."""

    def __init__(self, kube: tools.Kube, namespace: str) -> None:
        self.kube = kube
        self.ns = namespace

    def k(self, *args: str, timeout: float = 120) -> str:
        return self.kube.kubectl("-n", self.ns, *args, timeout=timeout)

    def json(self, *args: str) -> Any:
        return json.loads(self.k("get", *args, "-o", "json"))

    # --- setup ---------------------------------------------------------------

    def apply_examples(self) -> None:
        self.k("apply", "-f", str(ROOT / "examples"))

    def patch_group(self, **spec: Any) -> None:
        self.k("patch", "workergroup", GROUP, "--type", "merge", "-p", json.dumps({"spec": spec}))

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
        self.patch_group(**BASELINE)
        if self.worker_args() != DEFAULT_ARGS:
            self.set_worker_args(DEFAULT_ARGS)
        self.scale(REPLICAS)
        self.rollout_status()
        self.wait_balanced(REPLICAS)

    # --- observation ---------------------------------------------------------

    def expected(self) -> set[str]:
        """Every resource the Connectors ask for: the instances and their tasks."""
        out = set()
        for conn in self.json("connectors")["items"]:
            if conn["spec"].get("state", "running") == "stopped":
                continue
            name = conn["metadata"]["name"]
            out.add(name)
            out.update(f"{name}-{n}" for n in range(conn["spec"].get("tasksMax", 1)))
        return out

    def reports(self) -> dict[str, messages.Report]:
        live = {
            p["metadata"]["name"]
            for p in self.json("pods")["items"]
            if is_member_pod(p) and not p["metadata"].get("deletionTimestamp")
        }
        out = {}
        for lease in self.json("leases")["items"]:
            text = (lease["metadata"].get("annotations") or {}).get(messages.REPORT_ANNOTATION)
            if not text:
                continue
            try:
                report = codec.decode_report(text)
            except kooper_errors.KooperError:
                continue
            if report.member in live:
                out[report.member] = report
        return out

    def group_status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.json("workergroup", GROUP).get("status") or {}
        return status

    def balanced(self, members: int) -> bool:
        reports = self.reports()
        if len(reports) != members:
            return False
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
            interval_s=2,
        )

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
