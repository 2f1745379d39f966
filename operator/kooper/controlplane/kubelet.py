"""A kubelet stand-in: the pods of a local control plane as local processes.

One node (``NODE``), registered by the stand-in. For every Pod it

* binds it to the node when no scheduler did (``pods/binding``, as kube-scheduler);
* starts each container as a local process: the image's entrypoint (``IMAGES``:
  kooper's images run ``python -m kooper.cli``), the container's args, its env
  (values and the Downward API ``fieldRef``\\ s), and ``KUBERNETES_SERVICE_HOST``
  and ``_PORT`` pointing at the API server;
* mounts a ServiceAccount token bound to the pod (TokenRequest API), the CA and
  the namespace at ``/var/run/secrets/kubernetes.io/serviceaccount`` in a private
  mount namespace of the process (``unshare``), as the kubelet's projected volume
  does; the token is renewed at 80% of its lifetime; the pod's name is its hostname
  (a private UTS namespace);
* reports the pod's phase, container state and readiness (``readinessProbe``
  ``httpGet`` is probed; without one a started container is ready);
* restarts an exited container (``restartPolicy``) with a growing back-off;
* deletes as the kubelet does: a terminating Pod's process gets SIGTERM, then
  SIGKILL after the pod's grace period, and only then is the object removed
  (``gracePeriodSeconds=0``); a Pod that vanished (a forced delete) is SIGKILLed;
* keeps what a container runtime keeps of each container process, in
  ``<pod dir>/<container>.state.jsonl`` (``STATE_SUFFIX``): a ``started`` line before
  the process starts and a ``finished`` line (with its exit code) once it was reaped,
  each with wall-clock ``ts_ms``. Drills read it as a kind drill reads
  ``containerStatuses``: when a process could run anything, from its own start and end.

Pods share the host's loopback, so every ``containerPort`` is mapped to a free
local port: an argument or env value equal to the container port is rewritten to
the mapped one, and probes use it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from kooper.controlplane import processes
from kooper.sdk import apierrors, kube

log = logging.getLogger(__name__)

NODE = "kooper-local"
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3600
BACKOFF_MAX_S = 30.0

STATE_SUFFIX = ".state.jsonl"
"""``<container><STATE_SUFFIX>`` in a pod's directory: its processes' starts and ends."""

PYTHON_KOOPER = (sys.executable, "-m", "kooper.cli")
IMAGES: dict[str, tuple[str, ...]] = {"kooper": PYTHON_KOOPER, "kooper-worker": PYTHON_KOOPER}
"""Image repository (without registry and tag) -> its entrypoint as a local command."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def image_repository(image: str) -> str:
    """``registry:5000/team/kooper-worker:0.1.0`` -> ``kooper-worker``."""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


def entrypoint(container: Mapping[str, Any]) -> list[str] | None:
    """The local command line of a container; None if its image is not known here."""
    image = IMAGES.get(image_repository(str(container.get("image", ""))))
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    if command:
        head = IMAGES.get(command[0], (command[0],))
        return [*head, *command[1:], *args]
    if image is None:
        return None
    return [*image, *args]


def field_value(pod: Mapping[str, Any], path: str) -> str:
    """A Downward API ``fieldPath`` of ``pod``."""
    meta = pod.get("metadata") or {}
    for prefix, key in (("metadata.labels['", "labels"), ("metadata.annotations['", "annotations")):
        if path.startswith(prefix) and path.endswith("']"):
            return str((meta.get(key) or {}).get(path[len(prefix):-2], ""))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": (pod.get("spec") or {}).get("nodeName"),
        "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName"),
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    return str(simple.get(path) or "")


def remap(value: str, ports: Mapping[int, int]) -> str:
    """A container port named by ``value`` (exactly) becomes its mapped local port."""
    if value.isdigit() and int(value) in ports:
        return str(ports[int(value)])
    return value


@dataclasses.dataclass(slots=True)
class Probe:
    """A readiness probe (``httpGet`` only)."""

    path: str
    port: int
    period_s: float
    initial_delay_s: float
    timeout_s: float
    failure_threshold: int
    success_threshold: int

    def check(self) -> bool:
        url = f"http://127.0.0.1:{self.port}{self.path}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as answer:
                return 200 <= int(answer.status) < 400
        except (OSError, urllib.error.URLError):
            return False


@dataclasses.dataclass(slots=True)
class LocalPod:
    """One pod's (single) container process on this node."""

    uid: str
    namespace: str
    name: str
    container: str
    image: str
    dir: pathlib.Path
    argv: list[str]
    env: dict[str, str]
    probe: Probe | None
    restart_policy: str
    token_sa: str | None
    process: subprocess.Popen[bytes] | None = None
    started_at: str = ""
    started_mono: float = 0.0
    restarts: int = 0
    backoff_until: float = 0.0
    exit_code: int | None = None
    ready: bool = False
    probe_ok: int = 0
    probe_failed: int = 0
    next_probe: float = 0.0
    token_at: float = 0.0
    reported: str = ""
    terminating: threading.Thread | None = None
    terminated: bool = False
    finished: bool = False
    """The current process's ``finished`` line is in the state record."""

    @property
    def sa_dir(self) -> pathlib.Path:
        return self.dir / "run" / "secrets" / "kubernetes.io" / "serviceaccount"

    @property
    def log(self) -> pathlib.Path:
        return self.dir / f"{self.container}.log"

    def record(self, event: str, **fields: Any) -> None:
        """Append one line to the container's state record (``STATE_SUFFIX``)."""
        line = {"ts_ms": int(time.time() * 1000), "event": event, **fields}
        with (self.dir / f"{self.container}{STATE_SUFFIX}").open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")

    def reaped(self, process: subprocess.Popen[bytes]) -> None:
        """Record that ``process`` (reaped) finished, once."""
        if process is self.process and not self.finished:
            self.finished = True
            self.record("finished", exitCode=process.returncode)


class Kubelet:
    """Runs the node's pods; ``run`` is its loop (call it from a long-lived thread)."""

    def __init__(
        self,
        api: kube.Api,
        *,
        state_dir: pathlib.Path,
        api_host: str,
        api_port: int,
        ca_file: pathlib.Path,
        node: str = NODE,
        python_path: Sequence[str] = (),
    ) -> None:
        self.api = api
        self.state_dir = state_dir
        self.api_host = api_host
        self.api_port = api_port
        self.ca_file = ca_file
        self.node = node
        self.python_path = list(python_path)
        self.pods: dict[str, LocalPod] = {}
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self._watch: kube.WatchStream | None = None

    # -- the node ---------------------------------------------------------------------

    def register_node(self) -> None:
        """Create this node (Ready, loopback address) if it does not exist."""
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": self.node,
            "labels": {"kubernetes.io/hostname": self.node, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64"}}}
        with contextlib.suppress(apierrors.ApiError):
            self.api.create("/api/v1/nodes", body)
        now = _now()
        status = {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kooper's kubelet stand-in runs pods as processes",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                          {"type": "Hostname", "address": self.node}],
            "capacity": {"cpu": str(os.cpu_count() or 1), "memory": "16Gi", "pods": "250"},
            "allocatable": {"cpu": str(os.cpu_count() or 1), "memory": "16Gi", "pods": "250"},
            "nodeInfo": {"kubeletVersion": "kooper-kubelet", "containerRuntimeVersion": "process://",
                         "operatingSystem": "linux", "architecture": "amd64",
                         "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                         "osImage": "", "kubeProxyVersion": ""},
        }}
        self.api.merge_patch(f"/api/v1/nodes/{self.node}/status", status)

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> None:
        """Reconcile until ``stop``: woken by the pod watch, at least twice a second."""
        self.register_node()
        watcher = threading.Thread(target=self._watch_pods, name="kubelet-watch", daemon=True)
        watcher.start()
        try:
            while not self.stopping.is_set():
                self.wake.wait(0.5)
                self.wake.clear()
                try:
                    self.sync()
                except apierrors.ApiError as exc:
                    log.warning("kubelet sync: %s", exc)
        finally:
            self._shutdown()

    def stop(self) -> None:
        """End ``run``: every pod's process is stopped (SIGTERM, its grace, SIGKILL)."""
        self.stopping.set()
        self.wake.set()
        if self._watch is not None:
            self._watch.close()

    def _watch_pods(self) -> None:
        while not self.stopping.is_set():
            try:
                self._watch = self.api.watch("/api/v1/pods", query={"timeoutSeconds": "300"},
                                             read_timeout_s=330)
                for _event in self._watch:
                    self.wake.set()
            except apierrors.ApiError:
                self.stopping.wait(0.5)

    def _shutdown(self) -> None:
        threads = []
        for pod in self.pods.values():
            if pod.process is not None and pod.process.poll() is None:
                t = threading.Thread(target=processes.terminate, args=(pod.process, 10.0))
                t.start()
                threads.append(t)
        for t in threads:
            t.join()
        for pod in self.pods.values():
            if pod.terminating is not None:
                pod.terminating.join()

    def sync(self) -> None:
        """One pass over every Pod."""
        items = self.api.get("/api/v1/pods").get("items") or []
        seen = set()
        for pod in items:
            meta, spec = pod["metadata"], pod.get("spec") or {}
            uid = str(meta["uid"])
            if not spec.get("nodeName"):
                if not meta.get("deletionTimestamp"):
                    self._bind(pod)
                continue
            if spec["nodeName"] != self.node:
                continue
            seen.add(uid)
            local = self.pods.get(uid)
            if meta.get("deletionTimestamp"):
                self._terminating(pod, local)
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            if local is None:
                local = self._admit(pod)
                if local is None:
                    continue
            self._tend(pod, local)
        for uid in [u for u in self.pods if u not in seen]:
            self._vanished(self.pods.pop(uid))

    # -- binding and admission -----------------------------------------------------------

    def _bind(self, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": meta["name"], "uid": meta["uid"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.node}}
        try:
            self.api.create(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding",
                            body)
        except apierrors.ApiError as exc:
            if exc.status not in (404, 409):
                raise

    def _admit(self, pod: Mapping[str, Any]) -> LocalPod | None:
        """Prepare a pod's process (not started yet); None if it cannot run here."""
        meta, spec = pod["metadata"], pod["spec"]
        container = (spec.get("containers") or [{}])[0]
        argv = entrypoint(container)
        if argv is None:
            self._report_waiting(pod, container, "ErrImageNeverPull",
                                 f"image {container.get('image')} has no local entrypoint")
            return None
        ports = {int(p["containerPort"]): processes.free_port()
                 for p in container.get("ports") or [] if "containerPort" in p}
        named = {str(p["name"]): int(p["containerPort"])
                 for p in container.get("ports") or [] if p.get("name")}
        argv = [remap(a, ports) for a in argv]
        env = self._env(pod, container, ports)
        sa = spec.get("serviceAccountName") or "default"
        mount = spec.get("automountServiceAccountToken", True) is not False
        uid = str(meta["uid"])
        local = LocalPod(
            uid=uid, namespace=meta["namespace"], name=meta["name"],
            container=str(container.get("name", "main")), image=str(container.get("image", "")),
            dir=self.state_dir / "pods" / f"{meta['namespace']}_{meta['name']}_{uid[:8]}",
            argv=argv, env=env, probe=_probe(container, ports, named),
            restart_policy=str(spec.get("restartPolicy", "Always")),
            token_sa=sa if mount else None,
        )
        local.dir.mkdir(parents=True, exist_ok=True)
        self.pods[uid] = local
        return local

    def _env(self, pod: Mapping[str, Any], container: Mapping[str, Any],
             ports: Mapping[int, int]) -> dict[str, str]:
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
        env["PYTHONPATH"] = os.pathsep.join(self.python_path)
        env["PYTHONUNBUFFERED"] = "1"
        env["HOSTNAME"] = pod["metadata"]["name"]
        env["KUBERNETES_SERVICE_HOST"] = self.api_host
        env["KUBERNETES_SERVICE_PORT"] = str(self.api_port)
        namespace = pod["metadata"]["namespace"]
        for var in container.get("env") or []:
            name = str(var["name"])
            if "value" in var:
                env[name] = remap(str(var["value"]), ports)
                continue
            source = var.get("valueFrom") or {}
            if "fieldRef" in source:
                env[name] = field_value(pod, str(source["fieldRef"]["fieldPath"]))
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                cm = self.api.get(f"/api/v1/namespaces/{namespace}/configmaps/{ref['name']}")
                env[name] = str((cm.get("data") or {}).get(ref["key"], ""))
        return env

    # -- running ------------------------------------------------------------------------

    def _token(self, local: LocalPod) -> None:
        """Write (or renew) the pod's bound ServiceAccount token, CA and namespace."""
        if local.token_sa is None:
            return
        if local.token_at and time.monotonic() - local.token_at < 0.8 * TOKEN_SECONDS:
            return
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
            "expirationSeconds": TOKEN_SECONDS,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": local.name,
                               "uid": local.uid}}}
        answer = self.api.create(
            f"/api/v1/namespaces/{local.namespace}/serviceaccounts/{local.token_sa}/token", body)
        local.sa_dir.mkdir(parents=True, exist_ok=True)
        (local.dir / "hosts").write_text(
            f"127.0.0.1\tlocalhost\n{self.api_host}\tkubernetes kubernetes.default "
            f"kubernetes.default.svc kubernetes.default.svc.cluster.local\n"
            f"127.0.0.1\t{local.name}\n")
        shutil.copyfile(self.ca_file, local.sa_dir / "ca.crt")
        (local.sa_dir / "namespace").write_text(local.namespace)
        fresh = local.sa_dir / "token.new"
        fresh.write_text(str(answer["status"]["token"]))
        fresh.replace(local.sa_dir / "token")
        local.token_at = time.monotonic()

    def _command(self, local: LocalPod) -> list[str]:
        if local.token_sa is None:
            return local.argv
        # A private mount namespace whose /run holds only the pod's secrets and whose
        # /etc/hosts names the API server: the process finds its token and
        # kubernetes.default.svc where a container does; the host sees nothing. Its own
        # UTS namespace gives it the pod's name as hostname, as a container has (the
        # operator's leader identity is <hostname>/<pid>).
        unshare = ["unshare", "--mount", "--uts", "--propagation", "private"]
        if os.geteuid() != 0:
            unshare.append("--map-root-user")
        script = ('mount --bind "$0/run" /run && mount --bind "$0/hosts" /etc/hosts'
                  ' && hostname "$HOSTNAME" && exec "$@"')
        return [*unshare, "--", "sh", "-c", script, str(local.dir), *local.argv]

    def _start(self, local: LocalPod) -> None:
        self._token(local)
        local.record("started")
        local.process = processes.spawn(self._command(local), log=local.log, env=local.env,
                                        cwd=local.dir)
        local.finished = False
        local.started_at = _now()
        local.started_mono = time.monotonic()
        local.exit_code = None
        local.ready = local.probe is None
        local.probe_ok = local.probe_failed = 0
        if local.probe is not None:
            local.next_probe = local.started_mono + local.probe.initial_delay_s

    def _tend(self, pod: Mapping[str, Any], local: LocalPod) -> None:
        now = time.monotonic()
        if local.process is None:
            self._start(local)
        elif local.process.poll() is not None:
            if local.exit_code is None:
                local.reaped(local.process)
                local.exit_code = int(local.process.returncode)
                local.ready = False
                policy = local.restart_policy
                if policy == "Never" or (policy == "OnFailure" and local.exit_code == 0):
                    self._report(pod, local, final=True)
                    return
                local.backoff_until = now + min(BACKOFF_MAX_S, 2.0 ** min(local.restarts, 5))
            if now >= local.backoff_until:
                local.restarts += 1
                self._start(local)
        else:
            self._token(local)
            self._probe(local, now)
        self._report(pod, local)

    def _probe(self, local: LocalPod, now: float) -> None:
        probe = local.probe
        if probe is None or now < local.next_probe:
            return
        local.next_probe = now + probe.period_s
        if probe.check():
            local.probe_failed, local.probe_ok = 0, local.probe_ok + 1
            if local.probe_ok >= probe.success_threshold:
                local.ready = True
        else:
            local.probe_ok, local.probe_failed = 0, local.probe_failed + 1
            if local.probe_failed >= probe.failure_threshold:
                local.ready = False

    # -- status -------------------------------------------------------------------------

    def _report(self, pod: Mapping[str, Any], local: LocalPod, *, final: bool = False) -> None:
        running = local.process is not None and local.exit_code is None
        if running:
            state: dict[str, Any] = {"running": {"startedAt": local.started_at}}
        elif final:
            state = {"terminated": {"exitCode": local.exit_code,
                                    "reason": "Completed" if local.exit_code == 0 else "Error",
                                    "startedAt": local.started_at}}
        else:
            state = {"waiting": {"reason": "CrashLoopBackOff",
                                 "message": f"exited with {local.exit_code}"}}
        phase = "Running"
        if final:
            phase = "Succeeded" if local.exit_code == 0 else "Failed"
        ready = "True" if running and local.ready else "False"
        status: dict[str, Any] = {
            "phase": phase, "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}], "podIPs": [{"ip": "127.0.0.1"}],
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": ready},
                {"type": "ContainersReady", "status": ready},
                {"type": "PodScheduled", "status": "True"},
            ],
            "containerStatuses": [{
                "name": local.container, "image": local.image, "imageID": "",
                "containerID": f"kooper://{local.process.pid if local.process else 0}",
                "ready": ready == "True", "started": running,
                "restartCount": local.restarts, "state": state}],
        }
        key = json.dumps(status, sort_keys=True)
        if key == local.reported:
            return
        now = _now()
        for condition in status["conditions"]:
            condition["lastTransitionTime"] = now
        status["startTime"] = (pod.get("status") or {}).get("startTime") or now
        self._patch_status(local.namespace, local.name, status)
        local.reported = key

    def _report_waiting(self, pod: Mapping[str, Any], container: Mapping[str, Any],
                        reason: str, message: str) -> None:
        meta = pod["metadata"]
        status = {"phase": "Pending", "containerStatuses": [{
            "name": container.get("name", "main"), "image": container.get("image", ""),
            "imageID": "", "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}}}]}
        current = (pod.get("status") or {}).get("containerStatuses") or [{}]
        if (current[0].get("state") or {}).get("waiting", {}).get("reason") != reason:
            self._patch_status(meta["namespace"], meta["name"], status)

    def _patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        with contextlib.suppress(apierrors.NotFound):
            self.api.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                                 {"status": status})

    # -- deletion -----------------------------------------------------------------------

    def _terminating(self, pod: Mapping[str, Any], local: LocalPod | None) -> None:
        """A Pod with a deletionTimestamp: SIGTERM, its grace, SIGKILL, then the final delete."""
        meta = pod["metadata"]
        if local is None or local.process is None:
            if local is not None:
                self.pods.pop(local.uid, None)
            self._final_delete(meta["namespace"], meta["name"], str(meta["uid"]))
            return
        if local.terminating is None:
            grace = float(meta.get("deletionGracePeriodSeconds") or 30)
            process = local.process

            def stop() -> None:
                processes.terminate(process, grace)
                local.reaped(process)
                local.terminated = True
                self.wake.set()

            local.terminating = threading.Thread(target=stop, name=f"stop-{local.name}")
            local.terminating.start()
        elif local.terminated:
            self.pods.pop(local.uid, None)
            self._final_delete(meta["namespace"], meta["name"], str(meta["uid"]))

    def _final_delete(self, namespace: str, name: str, uid: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": uid}}
        try:
            self.api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body=body)
        except apierrors.ApiError as exc:
            if exc.status not in (404, 409):
                raise

    def _vanished(self, local: LocalPod) -> None:
        """The Pod object is gone (a forced delete): kill its process at once."""
        if local.process is not None and local.process.poll() is None:
            local.process.kill()
            local.process.wait()
        if local.terminating is not None:
            local.terminating.join()
        if local.process is not None:
            local.reaped(local.process)


def _probe(container: Mapping[str, Any], ports: Mapping[int, int],
           named: Mapping[str, int]) -> Probe | None:
    spec = container.get("readinessProbe") or {}
    http = spec.get("httpGet")
    if not http:
        return None
    port = http.get("port")
    number = named.get(str(port)) if isinstance(port, str) and not port.isdigit() else int(port)
    if number is None:
        return None
    return Probe(
        path=str(http.get("path", "/")),
        port=ports.get(number, number),
        period_s=float(spec.get("periodSeconds", 10)),
        initial_delay_s=float(spec.get("initialDelaySeconds", 0)),
        timeout_s=float(spec.get("timeoutSeconds", 1)),
        failure_threshold=int(spec.get("failureThreshold", 3)),
        success_threshold=int(spec.get("successThreshold", 1)),
    )
