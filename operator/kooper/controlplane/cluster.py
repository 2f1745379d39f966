"""etcd, kube-apiserver and kube-controller-manager on loopback, in one state directory.

Layout of the state directory:

    pki/          CA, serving certificate, service-account keys, static tokens
    etcd/         etcd's data (``--unsafe-no-fsync``: a test cluster, not a durable one)
    logs/         one log per process
    kubeconfig    the admin's kubeconfig (``kubectl --kubeconfig``, ``KUBECONFIG``)

Every port is a free loopback port picked at start. The API server listens where
a pod expects it: on port 443 of its own random address 127.x.y.z (pods resolve
``kubernetes.default.svc`` to it, as kopf's in-cluster login needs); without root
(no port 443) on a free port of 127.0.0.1, where clients that read
``KUBERNETES_SERVICE_HOST``/``_PORT`` still find it. ``stop`` ends the processes
(SIGTERM, then SIGKILL) in reverse order; the caller removes the directory.

``kill`` and ``restart`` take one process down (SIGKILL) and bring it back with the
same flags, ports and data directory (etcd keeps its data: a restart, not a wipe), so
its clients reconnect where they were; the chaos runs use them (e2e/leaders.py, through
the host's control socket, ``kooper.controlplane.host``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

from kooper.controlplane import binaries, pki, processes
from kooper.core import errors
from kooper.sdk import apierrors, kube

SERVICE_CIDR = "10.0.0.0/24"
ISSUER = "https://kubernetes.default.svc.cluster.local"
CONTEXT = "kooper-local"
DISABLED_CONTROLLERS = ("-node-lifecycle-controller", "-node-ipam-controller")
"""The kubelet stand-in renews no node heartbeat and there is no pod network: the rest runs."""
ORDER = ("etcd", "kube-apiserver", "kube-controller-manager")
"""The processes, in start order (``stop`` goes the other way)."""
RESTARTABLE = ("etcd", "kube-apiserver")
"""What ``kill`` and ``restart`` take down and bring back."""


class ControlPlaneError(errors.KooperError):
    """A control-plane process failed to start or died."""


@dataclasses.dataclass(slots=True)
class ControlPlane:
    """A running (or stopped) local control plane."""

    state_dir: pathlib.Path
    bin_dir: pathlib.Path
    certs: pki.Pki | None = None
    api_host: str = "127.0.0.1"
    api_port: int = 0
    etcd_port: int = 0
    etcd_peer_port: int = 0
    procs: dict[str, subprocess.Popen[bytes]] = dataclasses.field(default_factory=dict)

    # -- addresses and credentials --------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://{self.api_host}:{self.api_port}"

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.state_dir / "kubeconfig"

    @property
    def logs(self) -> pathlib.Path:
        return self.state_dir / "logs"

    def _pki(self) -> pki.Pki:
        if self.certs is None:
            raise ControlPlaneError("the control plane was not started")
        return self.certs

    def api(self, user: str = "admin", *, timeout_s: float = 30.0) -> kube.Api:
        """A client of the API server as ``user`` (admin, kubelet, controller-manager)."""
        p = self._pki()
        return kube.Api(self.server, token_file=p.token_path(user), ca_file=p.ca_cert,
                        timeout_s=timeout_s)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, *, timeout_s: float = 180.0) -> None:
        """Start etcd, the API server and the controller manager; return once all serve."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            self.api_host, self.api_port = processes.free_loopback_address(443), 443
        else:
            self.api_host, self.api_port = "127.0.0.1", processes.free_port()
        self.certs = pki.create(self.state_dir / "pki", api_ip=self.api_host)
        self._start_etcd(timeout_s)
        self._start_apiserver(timeout_s)
        self._write_kubeconfig(self.kubeconfig, "admin")
        self._write_kubeconfig(self.state_dir / "controller-manager.kubeconfig",
                               "controller-manager")
        self._start_controller_manager(timeout_s)

    def _bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    def check_alive(self) -> None:
        """Raise if a control-plane process exited."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with {proc.returncode}: "
                                        + processes.log_tail(self.logs / f"{name}.log"))

    def _start_etcd(self, timeout_s: float) -> None:
        if not self.etcd_port:
            self.etcd_port, self.etcd_peer_port = processes.free_port(), processes.free_port()
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{self.etcd_peer_port}"
        self.procs["etcd"] = processes.spawn([
            self._bin("etcd"), "--name", "kooper", "--data-dir", str(self.state_dir / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"kooper={peer_url}", "--unsafe-no-fsync",
            "--log-level", "warn", "--quota-backend-bytes", str(2 << 30),
        ], log=self.logs / "etcd.log")
        processes.wait_for("etcd to be healthy", self.etcd_healthy, timeout_s=timeout_s,
                           alive=self.check_alive)

    def etcd_healthy(self) -> bool:
        """Whether etcd answers ``/health`` with ``"health": "true"``."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health",
                                        timeout=2) as answer:
                return bool(json.loads(answer.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _start_apiserver(self, timeout_s: float) -> None:
        p = self._pki()
        self.procs["kube-apiserver"] = processes.spawn([
            self._bin("kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{self.etcd_port}",
            "--bind-address", self.api_host, "--advertise-address", self.api_host,
            "--secure-port", str(self.api_port),
            "--endpoint-reconciler-type", "none",
            # PodTemplates (which nothing here uses) bypass the watch cache, so a
            # test can watch etcd directly and see a compacted version's 410.
            "--watch-cache-sizes", "podtemplates#0",
            "--tls-cert-file", str(p.serving_cert), "--tls-private-key-file", str(p.serving_key),
            "--client-ca-file", str(p.ca_cert),
            "--token-auth-file", str(p.token_file),
            "--service-account-issuer", ISSUER,
            "--service-account-key-file", str(p.sa_pub),
            "--service-account-signing-key-file", str(p.sa_key),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--authorization-mode", "RBAC",
            "--allow-privileged=true",
            "--profiling=false",
            "--cert-dir", str(p.dir),
            "--v", "1",
        ], log=self.logs / "kube-apiserver.log")
        processes.wait_for("kube-apiserver /readyz", self.apiserver_ready, timeout_s=timeout_s,
                           interval_s=0.25, alive=self.check_alive)

    def apiserver_ready(self) -> bool:
        """Whether kube-apiserver answers ``/readyz`` with 200 (etcd reachable included)."""
        p = self._pki()
        context = ssl.create_default_context(cafile=str(p.ca_cert))
        token = p.users["admin"].token
        request = urllib.request.Request(f"{self.server}/readyz",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _start_controller_manager(self, timeout_s: float) -> None:
        p = self._pki()
        self.procs["kube-controller-manager"] = processes.spawn([
            self._bin("kube-controller-manager"),
            "--kubeconfig", str(self.state_dir / "controller-manager.kubeconfig"),
            "--authentication-skip-lookup",
            "--secure-port", "0",
            "--leader-elect=false",
            "--use-service-account-credentials",
            "--service-account-private-key-file", str(p.sa_key),
            "--root-ca-file", str(p.ca_cert),
            "--controllers", ",".join(("*", *DISABLED_CONTROLLERS)),
            "--concurrent-statefulset-syncs", "5",
            "--v", "1",
        ], log=self.logs / "kube-controller-manager.log")
        api = self.api()

        def serving() -> bool:
            # Its ServiceAccount controller gives every namespace a "default" account.
            try:
                api.get("/api/v1/namespaces/default/serviceaccounts/default")
            except apierrors.ApiError:
                return False
            return True

        processes.wait_for("kube-controller-manager (the default ServiceAccount)", serving,
                           timeout_s=timeout_s, interval_s=0.25, alive=self.check_alive)

    def _write_kubeconfig(self, path: pathlib.Path, user: str) -> None:
        p = self._pki()
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CONTEXT, "cluster": {
                "server": self.server, "certificate-authority": str(p.ca_cert)}}],
            "users": [{"name": f"{CONTEXT}-{user}", "user": {"token": p.users[user].token}}],
            "contexts": [{"name": CONTEXT, "context": {
                "cluster": CONTEXT, "user": f"{CONTEXT}-{user}", "namespace": "default"}}],
            "current-context": CONTEXT,
        }
        path.write_text(json.dumps(config, indent=2) + "\n")
        path.chmod(0o600)

    def pids(self) -> dict[str, int]:
        """Process name -> pid, of those running (a killed one is absent until restarted)."""
        return {name: proc.pid for name, proc in self.procs.items()}

    def kill(self, name: str) -> int:
        """SIGKILL ``name`` (one of ``RESTARTABLE``) and reap it; its pid.

        It is out of ``procs`` until ``restart``: ``check_alive`` does not count it.
        """
        if name not in RESTARTABLE:
            raise ControlPlaneError(f"cannot kill {name!r} (only {', '.join(RESTARTABLE)})")
        proc = self.procs.pop(name, None)
        if proc is None:
            raise ControlPlaneError(f"{name} is not running")
        proc.kill()
        proc.wait()
        return proc.pid

    def restart(self, name: str, *, timeout_s: float = 120.0) -> int:
        """Start ``name`` again (killed by ``kill``) with the same flags, ports and data;
        its pid, once it serves: etcd healthy and kube-apiserver ready again (its
        ``/readyz`` checks etcd), kube-apiserver ready."""
        if name not in RESTARTABLE:
            raise ControlPlaneError(f"cannot restart {name!r} (only {', '.join(RESTARTABLE)})")
        if name in self.procs:
            raise ControlPlaneError(f"{name} is running (kill it first)")
        with (self.logs / f"{name}.log").open("a") as log:
            log.write(f"--- kooper: {name} restarted ---\n")
        if name == "etcd":
            self._start_etcd(timeout_s)
        else:
            self._start_apiserver(timeout_s)
        self.procs = {n: self.procs[n] for n in ORDER if n in self.procs}
        if name == "etcd":
            processes.wait_for("kube-apiserver /readyz after etcd's restart",
                               self.apiserver_ready, timeout_s=timeout_s, interval_s=0.25,
                               alive=self.check_alive)
        self._wait_controllers(timeout_s)
        return self.procs[name].pid

    def _wait_controllers(self, timeout_s: float) -> None:
        """Return once the controller manager acts again after a restart: a new namespace
        gets its "default" ServiceAccount. Its watches were cut and come back on their
        own backoff (seconds, longer under load); a caller that creates a namespace right
        away would wait on that instead (the chaos tests share one control plane)."""
        api = self.api()
        name = f"kooper-restarted-{time.monotonic_ns()}"
        api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": name}})

        def acting() -> bool:
            try:
                api.get(f"/api/v1/namespaces/{name}/serviceaccounts/default")
            except apierrors.ApiError:
                return False
            return True

        try:
            processes.wait_for("kube-controller-manager after the restart (a new namespace's "
                               "default ServiceAccount)", acting, timeout_s=timeout_s,
                               interval_s=0.25, alive=self.check_alive)
        finally:
            with contextlib.suppress(apierrors.ApiError):
                api.delete(f"/api/v1/namespaces/{name}")

    def stop(self, *, grace_s: float = 15.0) -> None:
        """End every process, newest first (SIGTERM, then SIGKILL after ``grace_s``)."""
        for _name, proc in reversed(list(self.procs.items())):
            processes.terminate(proc, grace_s)
        self.procs.clear()


def kubeconfig_for_token(
    plane: ControlPlane, path: pathlib.Path, token: str, *, namespace: str = "default"
) -> pathlib.Path:
    """A kubeconfig that authenticates with ``token`` (e.g. a ServiceAccount's)."""
    config = json.loads(plane.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    config["contexts"][0]["context"]["namespace"] = namespace
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path


def locate_binaries(*, build: bool = True) -> pathlib.Path:
    """The binaries' directory (see ``kooper.controlplane.binaries``)."""
    return binaries.locate(build=build)
