"""The real chaos run's API backend: a real kube-apiserver, seen through the fault proxy.

``RealPlane`` gives ``chaos_real.Harness`` what ``EmulatorPlane`` gives it, on a local
control plane (``kooper.controlplane``: etcd, kube-apiserver, kube-controller-manager):

* a namespace of its own (CRDs installed, the chart's worker Role bound to the
  namespace's ``default`` ServiceAccount);
* the fault proxy (e2e/fault_proxy.py) in front of kube-apiserver, with a port for
  the operator (or one per operator replica) and one per pod name, and the emulator's
  fault switches on top of it;
* ``kooper run`` with a kubeconfig that points at the proxy and trusts its CA;
* ``RealPods``: the harness is the kubelet of a node of its own (``NODE``), so it
  starts and signals the worker processes itself, and writes their process rows.

A worker runs as a pod of the real API: its Pod object is bound to the harness's node
(the kubelet stand-in of the shared cluster leaves it alone), it authenticates with a
ServiceAccount token bound to that pod (TokenRequest API, as a kubelet mounts it), and
the SDK finds token, CA and API where a container finds them: a private mount
namespace (``unshare``) shows the pod's files at
``/var/run/secrets/kubernetes.io/serviceaccount`` (CA: the one that signed the
proxy's certificate), and ``KUBERNETES_SERVICE_HOST``/``_PORT`` name the pod's port of
the proxy. A SIGKILLed worker's Pod is force-deleted (``gracePeriodSeconds=0``) and
created again under the same name (a new uid), as a StatefulSet does; its Lease goes
with the old Pod through the real garbage collector. The pods have no owner: a
StatefulSet object would make the real StatefulSet controller create pods of the
same names, and for the operator a pod without an owner departs as one of a
StatefulSet within its replicas does (never "permanently").
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from e2e import fault_proxy
from kooper.controlplane import host
from kooper.demo import localplane, pods
from kooper.protocol import messages
from kooper.sdk import apierrors, kube

NODE_PREFIX = "kooper-chaos"
SA_DIR = pathlib.Path("run/secrets/kubernetes.io/serviceaccount")
TOKEN_SECONDS = 3600
OPERATOR = "operator"
_names = itertools.count()


def _admin(handle: host.Handle) -> kube.Api:
    return kube.Api(handle.server, token_file=handle.admin_token_file, ca_file=handle.ca_file,
                    timeout_s=30)


def _wait(what: str, check: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


class RealPods:
    """The worker pods of one namespace, their processes started and killed by us (the kubelet).

    The same calls ``chaos_real.Harness`` makes of ``kooper.demo.pods.PodRunner``.
    """

    def __init__(self, plane: RealPlane, *, workdir: pathlib.Path, replicas: int,
                 worker_args: tuple[str, ...], set_name: str = "workers",
                 app_label: str = "kooper-chaos-worker", grace_s: float = 5.0) -> None:
        self.plane = plane
        self.api = plane.admin
        self.workdir = workdir
        self.replicas = replicas
        self.worker_args = worker_args
        self.set_name = set_name
        self.app_label = app_label
        self.grace_s = grace_s
        self.pods: dict[str, pods.Pod] = {}
        self._generation = 0

    @property
    def namespace(self) -> str:
        return self.plane.namespace

    def pod_name(self, ordinal: int) -> str:
        """StatefulSet naming: ``<set>-<ordinal>``."""
        return f"{self.set_name}-{ordinal}"

    def _path(self, name: str = "") -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods" + (f"/{name}" if name else "")

    def create_statefulset(self) -> None:
        """Nothing to create: the pods have no owner (see the module docstring)."""

    def start_pod(self, ordinal: int) -> pods.Pod:
        """Create the Pod (bound to our node), mint its token, start its worker process."""
        name = self.pod_name(ordinal)
        created = self.api.create(self._path(), {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {
                pods.WORKER_LABEL: self.app_label,
                "statefulset.kubernetes.io/pod-name": name}},
            "spec": {"nodeName": self.plane.node, "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "worker", "image": "kooper-worker"}]},
        })
        uid = str(created["metadata"]["uid"])
        self._generation += 1
        stem = f"{name}.{self._generation}"
        pod_dir = self.workdir / "pods" / stem
        sa_dir = pod_dir / SA_DIR
        sa_dir.mkdir(parents=True, exist_ok=True)
        token = self.api.create(
            f"/api/v1/namespaces/{self.namespace}/serviceaccounts/default/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
                "expirationSeconds": TOKEN_SECONDS,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name,
                                   "uid": uid}}})
        (sa_dir / "token").write_text(str(token["status"]["token"]))
        assert self.plane.proxy.ca_file is not None
        shutil.copyfile(self.plane.proxy.ca_file, sa_dir / "ca.crt")
        (sa_dir / "namespace").write_text(self.namespace)
        events_file = self.workdir / f"{stem}.events.jsonl"
        log = (self.workdir / f"{stem}.log").open("wb")
        env = pods.child_env("", {
            "POD_NAME": name, "POD_NAMESPACE": self.namespace, "POD_UID": uid,
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.plane.proxy.add_client(name))})
        env.pop("KOOPER_KUBE_API", None)
        argv = [sys.executable, "-m", "kooper.cli", "worker", *self.worker_args,
                "--events-file", str(events_file)]
        unshare = ["unshare", "--mount", "--propagation", "private"]
        if os.geteuid() != 0:
            unshare.append("--map-root-user")
        # As the kubelet stand-in does: /run of a private mount namespace holds the pod's
        # secrets (the shell execs the worker, so the pid we hold is the worker's).
        script = 'mount --bind "$0/run" /run && exec "$@"'
        process = subprocess.Popen([*unshare, "--", "sh", "-c", script, str(pod_dir), *argv],
                                   env=env, stdout=log, stderr=subprocess.STDOUT)
        pod = pods.Pod(name=name, uid=uid, process=process, events_file=events_file, log=log,
                       started_at=time.monotonic())
        self.pods[name] = pod
        return pod

    def kill_pod(self, ordinal: int) -> pods.Stopped | None:
        """SIGKILL the worker, then force-delete its Pod (the Lease goes with it, by GC)."""
        name = self.pod_name(ordinal)
        pod = self.pods.pop(name, None)
        stopped = None if pod is None else pods.killed(pod)
        with contextlib.suppress(apierrors.ApiError):
            self.api.request("DELETE", self._path(name), query={"gracePeriodSeconds": "0"})
        _wait(f"pod {name} to be gone", lambda: not self._exists(name))
        return stopped

    def _exists(self, name: str) -> bool:
        try:
            self.api.get(self._path(name))
        except apierrors.ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def has_joined(self, pod: pods.Pod) -> bool:
        """Whether this incarnation is alive and reported in its Lease (owned by its uid)."""
        if pod.process.poll() is not None:
            return False
        try:
            lease = self.api.get(kube.lease_path(self.namespace, f"kooper-{pod.name}"))
        except apierrors.ApiError:
            return False
        metadata = lease.get("metadata", {})
        owners = {ref.get("uid") for ref in metadata.get("ownerReferences", [])}
        return pod.uid in owners and messages.REPORT_ANNOTATION in (
            metadata.get("annotations") or {})

    def events_files(self) -> list[pathlib.Path]:
        """Every worker events file written so far (old incarnations included)."""
        return sorted(self.workdir.glob("*.events.jsonl"))

    def shutdown(self) -> None:
        """Stop every worker process (SIGTERM, its grace, SIGKILL), then force-delete its
        Pod: no kubelet but us would ever confirm a graceful deletion of our node's pods."""
        for pod in list(self.pods.values()):
            with contextlib.suppress(ProcessLookupError):
                pod.process.terminate()
        for pod in list(self.pods.values()):
            try:
                pod.process.wait(self.grace_s)
            except subprocess.TimeoutExpired:
                pod.process.kill()
                pod.process.wait()
            pod.log.close()
            with contextlib.suppress(apierrors.ApiError):
                self.api.request("DELETE", self._path(pod.name),
                                 query={"gracePeriodSeconds": "0"})
        self.pods.clear()


class RealPlane:
    """A namespace of a running local cluster, the fault proxy in front of its API server."""

    name = "real"

    def __init__(self, handle: host.Handle, workdir: pathlib.Path) -> None:
        self.handle = handle
        self.workdir = workdir
        self.admin = _admin(handle)
        serial = f"{os.getpid()}-{next(_names)}"
        self.namespace = f"chaos-{serial}"
        self.node = f"{NODE_PREFIX}-{serial}"
        ca_key = handle.ca_file.parent / "ca.key"
        self.proxy = fault_proxy.FaultProxy(handle.server, upstream_ca=handle.ca_file,
                                            workdir=workdir / "proxy",
                                            ca_key=ca_key if ca_key.exists() else None)
        self.kubeconfig = workdir / "operator.kubeconfig"

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the proxy; make the CRDs, the node, the namespace and the worker Role."""
        self.proxy.start()
        if not all(self._established(plural) for plural in localplane.KINDS):
            localplane.install_crds(self.handle)
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node}}
        self.admin.create("/api/v1/nodes", node)
        self.admin.create("/api/v1/namespaces", {"metadata": {"name": self.namespace}})
        base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{self.namespace}"
        self.admin.create(f"{base}/roles", {"metadata": {"name": "kooper-worker"},
                                            "rules": localplane.WORKER_RULES})
        self.admin.create(f"{base}/rolebindings", {
            "metadata": {"name": "kooper-worker"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "kooper-worker"},
            "subjects": [{"kind": "ServiceAccount", "name": "default",
                          "namespace": self.namespace}]})
        _wait(f"the default ServiceAccount of {self.namespace}", self._has_default_sa)
        # A CRD just established answers 429 "storage is (re)initializing" for a moment:
        # the operator would wait out its retry back-off at start.
        _wait("the CRDs' storage", lambda: all(self._serving(plural)
                                               for plural in localplane.KINDS))
        self._write_kubeconfig(self.kubeconfig, OPERATOR)

    def _write_kubeconfig(self, path: pathlib.Path, client: str) -> None:
        """The admin kubeconfig, pointed at ``client``'s port of the proxy."""
        config = json.loads(self.handle.kubeconfig.read_text())
        assert self.proxy.ca_file is not None
        for cluster in config["clusters"]:
            cluster["cluster"] = {"server": self.proxy.url(client),
                                  "certificate-authority": str(self.proxy.ca_file)}
        for context in config["contexts"]:
            context["context"]["namespace"] = self.namespace
        path.write_text(json.dumps(config, indent=2) + "\n")
        path.chmod(0o600)

    def _established(self, plural: str) -> bool:
        try:
            crd = self.admin.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                 f"{plural}.kooper.dev")
        except apierrors.ApiError:
            return False
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or ())

    def _serving(self, plural: str) -> bool:
        try:
            self.admin.get(f"{localplane.KINDS[plural]}/namespaces/{self.namespace}/{plural}")
        except apierrors.ApiError:
            return False
        return True

    def _has_default_sa(self) -> bool:
        try:
            self.admin.get(f"/api/v1/namespaces/{self.namespace}/serviceaccounts/default")
        except apierrors.ApiError:
            return False
        return True

    def stop(self) -> None:
        """Stop the proxy, delete the namespace (in the background) and the node."""
        self.proxy.stop()
        for path in (f"/api/v1/namespaces/{self.namespace}", f"/api/v1/nodes/{self.node}"):
            with contextlib.suppress(apierrors.ApiError):
                self.admin.delete(path)

    def pod_runner(self, *, workdir: pathlib.Path, replicas: int,
                   worker_args: tuple[str, ...]) -> RealPods:
        """The pods' kubelet (``RealPods``)."""
        return RealPods(self, workdir=workdir, replicas=replicas, worker_args=worker_args)

    # --- objects and processes ---------------------------------------------------------------

    def create(self, plural: str, body: Mapping[str, Any]) -> None:
        """Create a WorkerGroup or a Connector in the namespace (directly, no faults)."""
        self.admin.create(f"{localplane.KINDS[plural]}/namespaces/{self.namespace}/{plural}",
                          body)

    def operator_command(self, client: str = OPERATOR) -> tuple[list[str], dict[str, str]]:
        """The operator's extra arguments and its environment: a kubeconfig that reaches
        the API through ``client``'s port of the proxy (one per operator replica, so a
        fault can target one of them)."""
        kubeconfig = self.kubeconfig
        if client != OPERATOR:
            kubeconfig = self.workdir / f"{client}.kubeconfig"
            self._write_kubeconfig(kubeconfig, client)
        env = pods.child_env("")
        env.pop("KOOPER_KUBE_API", None)
        return ["--kubeconfig", str(kubeconfig)], env

    # --- faults ------------------------------------------------------------------------------

    def fail_next_writes(self, count: int, *, code: int) -> None:
        """The next ``count`` writes of any client through the proxy answer ``code``."""
        self.proxy.fail_next_writes(count, code=code)

    def pending_failures(self) -> int:
        """Injected errors not served yet."""
        return self.proxy.pending_failures()

    def set_delay(self, seconds: float) -> None:
        """Hold every request through the proxy ``seconds``."""
        self.proxy.set_delay(seconds)

    def control_pids(self) -> dict[str, int]:
        """The control plane's processes (name -> pid) that run now."""
        return self.handle.control("pids")

    def kill_control(self, process: str) -> int:
        """SIGKILL the cluster's ``kube-apiserver`` or ``etcd`` (the host does it, see
        ``kooper.controlplane.host``); its pid. Every namespace of the cluster loses it."""
        pid = self.control_pids()[process]
        self.handle.kill(process)
        return pid

    def probe(self, timeout_s: float = 3.0) -> str:
        """Read the namespace as the admin, directly (not through the proxy): "" if it
        answered, else how it failed (refused, timed out, the API server's error)."""
        api = kube.Api(self.handle.server, token_file=self.handle.admin_token_file,
                       ca_file=self.handle.ca_file, timeout_s=timeout_s)
        try:
            api.get(f"/api/v1/namespaces/{self.namespace}")
        except apierrors.ApiError as exc:
            return f"{type(exc).__name__} {exc.status}: {exc}"[:200]
        return ""

    def restart_control(self, process: str) -> int:
        """Start it again (same ports, flags and data) once it serves; its new pid."""
        return self.handle.restart(process)[process]
