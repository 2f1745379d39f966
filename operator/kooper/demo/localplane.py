"""The demo on the real local control plane (``kooper demo --control-plane real``).

Each run gets a namespace of a local cluster (``kooper.controlplane``: etcd,
kube-apiserver, kube-controller-manager, the kubelet stand-in running pods as
processes). The operator runs as ``kooper run`` on this machine with the
admin's kubeconfig, watching that namespace, exactly as in the embedded demo;
the workers are a real StatefulSet: the StatefulSet controller creates the
pods, the kubelet stand-in starts ``kooper worker --demo`` for each with a
token bound to the pod (a Role lets the namespace's default ServiceAccount
read ConfigMaps and write Leases, as the chart's worker Role does), and the
rolling restart deletes pods through the API (highest ordinal first, each
after its replacement joined): the kubelet's SIGTERM and grace period, then the
controller's replacement. What ``--restart`` sets in the emulator is here the
time the controller and the kubelet really take.

Worker event logs are the ``events.jsonl`` each pod writes in its directory
under the cluster's state (``<state>/pods/<namespace>_<pod>_<uid>/``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

from kooper.controlplane import binaries, host, kubelet, processes
from kooper.core import events
from kooper.demo import cluster as embedded_cluster
from kooper.demo import drill, pods
from kooper.protocol import messages
from kooper.sdk import apierrors, kube

CRDS_DIR = embedded_cluster.CRDS_DIR
KINDS = {"workergroups": "/apis/kooper.dev/v1alpha1", "connectors": "/apis/kooper.dev/v1alpha1"}
WORKER_RULES = [
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": ["get", "create", "update", "patch", "delete"]},
]
"""The chart's worker Role (charts/kooper/templates/worker-rbac.yaml)."""


def binaries_or_hint() -> pathlib.Path:
    """The control plane's binaries, or a DemoError telling the user to build them."""
    try:
        return binaries.locate(build=False)
    except binaries.BinariesError as exc:
        raise pods.DemoError(
            "--control-plane real needs Kubernetes' binaries: run `make kube-bins` first "
            f"(or set {binaries.BIN_DIR_ENV})") from exc


def admin_api(handle: host.Handle) -> kube.Api:
    """The SDK's REST client as the cluster's admin."""
    return kube.Api(handle.server, token_file=handle.admin_token_file, ca_file=handle.ca_file,
                    timeout_s=30)


CRD_NAMES = ("workergroups.kooper.dev", "connectors.kooper.dev")


def install_crds(handle: host.Handle) -> None:
    """``kubectl apply --server-side -f crds/``, then wait until both are Established."""
    kubectl = [str(handle.kubectl), "--kubeconfig", str(handle.kubeconfig)]
    done = subprocess.run([*kubectl, "apply", "--server-side", "--force-conflicts", "-f",
                           str(CRDS_DIR)], capture_output=True, text=True, timeout=90,
                          check=False)
    if done.returncode != 0:
        raise pods.DemoError(f"kubectl apply crds/: {done.stderr.strip()}")
    wait_established(kubectl, CRD_NAMES)


def wait_established(kubectl: Sequence[str], names: Sequence[str], *,
                     timeout_s: float = 60) -> None:
    """``kubectl wait --for=condition=Established`` on the CRDs ``names`` (``kubectl``:
    the command and its kubeconfig/context flags); DemoError if they are not in time.

    kubectl's wait fails at once ("``.status.conditions`` accessor error") on a CRD the
    API server has not given any condition yet, which a loaded machine makes likely
    right after the apply: that is "not yet", and it waits again.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(1, int(deadline - time.monotonic()))
        done = subprocess.run(
            [*kubectl, "wait", "--for=condition=Established", *(f"crd/{n}" for n in names),
             f"--timeout={left}s"],
            capture_output=True, text=True, timeout=left + 30, check=False)
        if done.returncode == 0:
            return
        if "conditions accessor error" not in done.stderr or time.monotonic() > deadline:
            raise pods.DemoError(f"kubectl wait crds/: {done.stderr.strip()}")
        time.sleep(0.2)  # no conditions yet: the next wait watches them appear


@contextlib.contextmanager
def local_cluster(out: pathlib.Path, *, cluster_dir: pathlib.Path | None,
                  progress: Callable[[str], None]) -> Iterator[host.Handle]:
    """The running cluster in ``cluster_dir``, or a fresh one under ``out/cluster`` (stopped)."""
    if cluster_dir is not None:
        handle = host.read_handle(cluster_dir)
        if handle is None:
            raise pods.DemoError(f"--cluster-dir {cluster_dir}: no local cluster runs there "
                                 f"(`kooper cluster up --dir {cluster_dir}`)")
        install_crds(handle)
        yield handle
        return
    bins = binaries_or_hint()
    state = out.resolve() / "cluster"
    running = host.read_handle(state)
    if running is not None and processes.pid_alive(running.pid):
        raise pods.DemoError(f"a local cluster already runs in {state} (another kooper demo "
                             f"--keep?): stop it, or use it with --cluster-dir {state}")
    host.clean(state)  # what a killed earlier demo left: etcd data of another cluster
    progress("  starting the local control plane (etcd, kube-apiserver, "
             "kube-controller-manager, the kubelet stand-in)")
    started = time.monotonic()
    handle = host.start(state, bin_dir=bins)
    try:
        progress(f"  local cluster at {handle.server} ({time.monotonic() - started:.0f} s)")
        install_crds(handle)
        yield handle
    finally:
        handle.stop()


@dataclasses.dataclass(frozen=True, slots=True)
class PodRef:
    """One incarnation of a pod: its name and uid."""

    name: str
    uid: str


class Namespace:
    """A run's namespace of the local cluster, with ``kooper run`` watching it."""

    def __init__(self, handle: host.Handle, *, workdir: pathlib.Path, namespace: str) -> None:
        """Prepare; ``start`` creates the namespace and starts the operator."""
        self.handle = handle
        self.api = admin_api(handle)
        self.workdir = workdir
        self._namespace = namespace
        self._audit_log = workdir / "operator.audit.jsonl"
        self.operator_log_path = workdir / "operator.log"
        self.operator: subprocess.Popen[bytes] | None = None
        self._operator_log: IO[bytes] | None = None

    @property
    def namespace(self) -> str:
        """The run's namespace."""
        return self._namespace

    @property
    def audit_log(self) -> pathlib.Path:
        """The operator's audit log (its ``round``, ``join`` and ``leave`` rows)."""
        return self._audit_log

    def describe(self) -> str:
        """The progress line of a run."""
        pid = f"; operator pid {self.operator.pid}" if self.operator is not None else ""
        return f"namespace {self.namespace} of the local cluster at {self.handle.server}{pid}"

    def start(self) -> None:
        """Create the namespace and the worker Role, then start ``kooper run`` against it."""
        self.api.create("/api/v1/namespaces", {"metadata": {"name": self.namespace}})
        base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{self.namespace}"
        self.api.create(f"{base}/roles", {"metadata": {"name": "kooper-worker"},
                                          "rules": WORKER_RULES})
        self.api.create(f"{base}/rolebindings", {
            "metadata": {"name": "kooper-worker"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "kooper-worker"},
            "subjects": [{"kind": "ServiceAccount", "name": "default",
                          "namespace": self.namespace}]})
        self._operator_log = self.operator_log_path.open("wb")
        argv = [sys.executable, "-m", "kooper.cli", "run", "--kubeconfig",
                str(self.handle.kubeconfig), "--namespace", self.namespace,
                "--metrics-port", "0", "--health-port", "0", "--audit-log", str(self.audit_log)]
        env = pods.child_env("")
        env.pop("KOOPER_KUBE_API", None)
        self.operator = subprocess.Popen(argv, env=env, stdout=self._operator_log,
                                         stderr=subprocess.STDOUT)

    def check_operator(self) -> None:
        """Raise if the operator process died (with the tail of its log)."""
        if self.operator is not None and self.operator.poll() is not None:
            raise pods.DemoError(f"the operator exited with {self.operator.returncode}: "
                                 + pods.log_tail(self.operator_log_path))

    def how_to_look(self) -> list[str]:
        """Commands that look at the kept run from another shell."""
        config = self.handle.kubeconfig
        return [f"{self.handle.kubectl} --kubeconfig {config} -n {self.namespace} "
                f"get wg,kconn,pods,events",
                f"kooper status {drill.GROUP} -n {self.namespace} --kubeconfig {config}"]

    def create(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a WorkerGroup or a Connector in the namespace."""
        return self.api.create(f"{KINDS[ref]}/namespaces/{self.namespace}/{ref}", body)

    def stop(self, *, delete: bool) -> None:
        """Stop the operator (SIGTERM, then SIGKILL); ``delete`` also deletes the namespace."""
        if self.operator is not None:
            processes.terminate(self.operator, 10)
        if self._operator_log is not None:
            self._operator_log.close()
            self._operator_log = None
        if delete:
            with contextlib.suppress(apierrors.ApiError):
                self.api.delete(f"/api/v1/namespaces/{self.namespace}")


class StatefulSetPods:
    """The workers as a real StatefulSet: restarts go through the API, kubelet and controller."""

    def __init__(self, namespace: Namespace, *, worker_args: tuple[str, ...], replicas: int,
                 set_name: str = "workers", app_label: str = "kooper-demo-worker",
                 grace_s: int = 10) -> None:
        """Prepare; ``start_all`` creates the StatefulSet."""
        self.ns = namespace
        self.api = namespace.api
        self.set_name = set_name
        self._app_label = app_label
        self.replicas = replicas
        self.worker_args = worker_args
        self.grace_s = grace_s
        self._pods: dict[str, PodRef] = {}
        self._shut_ms: int | None = None
        """When ``shutdown`` began: the processes it stops are after the run."""
        self._rendered: dict[pathlib.Path, tuple[int, int | None]] = {}
        """Per lifecycle file: (the kubelet record's size, ``_shut_ms``) it was written for."""

    @property
    def workdir(self) -> pathlib.Path:
        """Where the run's files go (the pods' own files are under the cluster's state)."""
        return self.ns.workdir

    @property
    def app_label(self) -> str:
        """The value of the label the WorkerGroup selects its pods by."""
        return self._app_label

    @property
    def pods(self) -> dict[str, PodRef]:
        """The pods seen running, by name."""
        return self._pods

    def _pods_path(self, name: str = "") -> str:
        return f"/api/v1/namespaces/{self.ns.namespace}/pods" + (f"/{name}" if name else "")

    def start_all(self) -> None:
        """Create the StatefulSet (``podManagementPolicy: Parallel``) and wait for its pods."""
        labels = {pods.WORKER_LABEL: self.app_label}
        env = [{"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}}
               for n, p in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"),
                            ("POD_UID", "metadata.uid"))]
        self.api.create(f"/apis/apps/v1/namespaces/{self.ns.namespace}/statefulsets", {
            "metadata": {"name": self.set_name, "labels": labels},
            "spec": {"replicas": self.replicas, "serviceName": self.set_name,
                     "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": self.grace_s,
                         "containers": [{
                             "name": "worker", "image": "kooper-worker",
                             "args": ["worker", *self.worker_args,
                                      "--events-file", "events.jsonl"],
                             "env": env}]}}}})
        for ordinal in range(self.replicas):
            self._wait_new(f"{self.set_name}-{ordinal}", old_uid=None, timeout_s=60)

    def _wait_new(self, name: str, *, old_uid: str | None, timeout_s: float) -> PodRef:
        """The pod ``name`` once an incarnation other than ``old_uid`` exists."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.ns.check_operator()
            try:
                body = self.api.get(self._pods_path(name))
                uid = str(body["metadata"]["uid"])
                if uid != old_uid and not body["metadata"].get("deletionTimestamp"):
                    self._pods[name] = PodRef(name, uid)
                    return self._pods[name]
            except apierrors.NotFound:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"pod {name} was not (re)created in {timeout_s}s")
            time.sleep(0.2)

    def joined_lease(self, pod: PodRef) -> dict[str, Any] | None:
        """The pod's Lease if this incarnation's worker reported in it (owned by this
        pod's uid), else None."""
        try:
            lease: dict[str, Any] = self.api.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{self.ns.namespace}"
                f"/leases/kooper-{pod.name}")
        except apierrors.ApiError:
            return None
        metadata = lease.get("metadata", {})
        owners = {ref.get("uid") for ref in metadata.get("ownerReferences", [])}
        joined = pod.uid in owners and messages.REPORT_ANNOTATION in (
            metadata.get("annotations") or {})
        return lease if joined else None

    def has_joined(self, pod: PodRef) -> bool:
        """Whether this incarnation's worker reported in its Lease (``joined_lease``)."""
        return self.joined_lease(pod) is not None

    def has_assignment(self, pod: PodRef) -> bool:
        """Whether this incarnation joined and applied a document the operator wrote
        for it (``pods.acts_on_a_document``): where the demo's roll goes on."""
        return pods.acts_on_a_document(self.joined_lease(pod))

    def rolling_restart(self, *, restart_s: float, joined: Callable[[Any], bool],
                        progress: Callable[[str], None], join_timeout_s: float = 60.0) -> None:
        """Delete each pod (highest ordinal first); go on once its replacement ``joined``.

        ``restart_s`` is not used: the StatefulSet controller and the kubelet take
        the time they take.
        """
        del restart_s
        for ordinal in reversed(range(self.replicas)):
            name = f"{self.set_name}-{ordinal}"
            old = self._pods.get(name) or self._wait_new(name, old_uid=None, timeout_s=30)
            progress(f"restarting {name}")
            self.api.delete(self._pods_path(name))
            pod = self._wait_new(name, old_uid=old.uid, timeout_s=join_timeout_s)
            deadline = time.monotonic() + join_timeout_s
            while not joined(pod):
                self.check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} did not rejoin in {join_timeout_s}s")
                time.sleep(0.1)

    def _pod_dirs(self) -> list[pathlib.Path]:
        return sorted((self.ns.handle.state_dir / "pods").glob(f"{self.ns.namespace}_*"))

    def events_files(self) -> list[pathlib.Path]:
        """Every worker incarnation's ``events.jsonl`` (old incarnations included), and
        beside each its process's ``join``/``leave`` rows (``lifecycle_rows``)."""
        files = []
        for pod_dir in self._pod_dirs():
            if (pod_dir / "events.jsonl").exists():
                files.append(pod_dir / "events.jsonl")
            record = pod_dir / f"worker{kubelet.STATE_SUFFIX}"
            if not record.exists():
                continue
            path = self.workdir / f"{pod_dir.name}.lifecycle.jsonl"
            key = (record.stat().st_size, self._shut_ms)
            if self._rendered.get(path) != key:  # polled while a run converges: rewrite
                rows = lifecycle_rows(pod_dir, container="worker", until_ms=self._shut_ms)
                path.write_text("".join(row.to_json() + "\n" for row in rows))
                self._rendered[path] = key
            files.append(path)
        return files

    def check_alive(self) -> None:
        """Raise if a worker container exited and was restarted by the kubelet."""
        for pod in self.api.get(self._pods_path()).get("items") or []:
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                if int(status.get("restartCount", 0)) > 0:
                    name, uid = pod["metadata"]["name"], str(pod["metadata"]["uid"])
                    logs = [d / "worker.log" for d in self._pod_dirs()
                            if d.name.endswith(uid[:8])]
                    raise pods.DemoError(f"worker {name} exited and was restarted: "
                                         + (pods.log_tail(logs[0]) if logs else ""))

    def shutdown(self) -> None:
        """Delete the StatefulSet: the controller deletes the pods, the kubelet stops them."""
        if self._shut_ms is None:
            self._shut_ms = drill.now_ms()
        with contextlib.suppress(apierrors.ApiError):
            self.api.delete(f"/apis/apps/v1/namespaces/{self.ns.namespace}/statefulsets/"
                            f"{self.set_name}")


def lifecycle_rows(pod_dir: pathlib.Path, *, container: str,
                   until_ms: int | None = None) -> list[events.Event]:
    """The kubelet's record of a pod's container processes (``kubelet.STATE_SUFFIX``) as
    drill rows: ``join`` when a process started, ``leave`` when it was reaped; none
    from ``until_ms`` on (the run's pods being shut down, as the pod runner writes none)."""
    path = pod_dir / f"{container}{kubelet.STATE_SUFFIX}"
    if not path.exists():
        return []
    member = pod_dir.name.split("_")[1]  # <namespace>_<pod>_<uid prefix>: no "_" in names
    kinds = {"started": events.Kind.JOIN, "finished": events.Kind.LEAVE}
    rows = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line (the kubelet was stopped mid-write)
        if until_ms is not None and int(record["ts_ms"]) >= until_ms:
            continue
        rows.append(events.Event(ts_ms=int(record["ts_ms"]), run="", group="", member=member,
                                 resource="", event=kinds[record["event"]]))
    return rows


def site(handle: host.Handle, *, keep_namespaces: bool = False) -> drill.Site:
    """A ``drill.Site`` that runs each run in namespace ``demo-<run>`` of ``handle``'s cluster."""

    @contextlib.contextmanager
    def run_site(workdir: pathlib.Path, run: str, settings: drill.Settings
                 ) -> Iterator[tuple[drill.Cluster, drill.Members]]:
        namespace = Namespace(handle, workdir=workdir, namespace=f"demo-{run}")
        try:
            namespace.start()
            members = StatefulSetPods(namespace, replicas=settings.pods,
                                      worker_args=drill.worker_args(settings, run=run))
            yield namespace, members
        finally:
            namespace.stop(delete=not keep_namespaces)

    return run_site
