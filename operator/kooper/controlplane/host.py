"""One process that owns a local cluster: control plane plus kubelet stand-in.

``python -m kooper.controlplane.host --state-dir D`` starts etcd, kube-apiserver,
kube-controller-manager and the kubelet stand-in, writes ``D/ready.json``
(server, kubeconfig, pid) once pods can run, and on SIGTERM or SIGINT stops the
pods (each with its grace), then the control plane, and removes ``D``'s
contents unless ``--keep``. Every child is tied to it (``PR_SET_PDEATHSIG``), so
even a SIGKILL of the host leaves no process behind.

``start`` (the pytest fixture and ``kooper cluster up`` use it) runs the host
as a child and returns a ``Handle`` once the cluster is ready.

The host also listens on a Unix socket, ``D/control.sock``: one JSON line in
(``{"action": "kill" | "restart" | "pids", "process": "kube-apiserver" | "etcd"}``),
one JSON line out (``{"ok": true, "pids": {...}}`` or ``{"ok": false, "error": ...}``);
``Handle.kill`` and ``Handle.restart`` speak it. The host's main thread does the work
(``cluster.ControlPlane.kill``, ``restart``): a restarted process is tied to the
thread that started it, and that one lives as long as the cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import queue
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from kooper.controlplane import binaries, cluster, kubelet, processes
from kooper.core import errors

READY = "ready.json"
FAILED = "failed.txt"
CONTROL = "control.sock"


class HostError(errors.KooperError):
    """The local cluster did not come up."""


@dataclasses.dataclass(frozen=True, slots=True)
class Handle:
    """A running local cluster, as its host process reported it."""

    state_dir: pathlib.Path
    server: str
    kubeconfig: pathlib.Path
    bin_dir: pathlib.Path
    ca_file: pathlib.Path
    admin_token_file: pathlib.Path
    etcd_url: str
    pid: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def kubectl(self) -> pathlib.Path:
        return self.bin_dir / "kubectl"

    def control(self, action: str, process: str = "", *, timeout_s: float = 180.0
                ) -> dict[str, int]:
        """Ask the host (its control socket) to ``kill``, ``restart`` or list (``pids``)
        a control-plane process; the pids of those running once it is done."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(self.state_dir / CONTROL))
            sock.sendall(json.dumps({"action": action, "process": process}).encode() + b"\n")
            with sock.makefile("rb") as answers:
                line = answers.readline()
        answer: dict[str, Any] = (json.loads(line) if line
                                  else {"ok": False, "error": "no answer"})
        if not answer.get("ok"):
            raise HostError(f"{action} {process}: {answer.get('error')}")
        pids: dict[str, Any] = answer["pids"]
        return {str(name): int(pid) for name, pid in pids.items()}

    def kill(self, process: str) -> dict[str, int]:
        """SIGKILL ``process`` (``kube-apiserver`` or ``etcd``); the pids still running."""
        return self.control("kill", process)

    def restart(self, process: str) -> dict[str, int]:
        """Start ``process`` again (same flags, ports, data) and wait until it serves."""
        return self.control("restart", process)

    def stop(self, *, timeout_s: float = 120.0) -> None:
        """SIGTERM the host and wait until it (and so every child) is gone."""
        if self.process is not None:  # our child: wait() reaps it (a zombie still "exists")
            processes.terminate(self.process, timeout_s)
        else:
            stop_pid(self.pid, timeout_s=timeout_s)


def read_handle(state_dir: pathlib.Path) -> Handle | None:
    """The handle of the cluster whose host wrote ``state_dir/ready.json``, if any."""
    path = state_dir / READY
    if not path.exists():
        return None
    info = json.loads(path.read_text())
    return Handle(state_dir=state_dir, server=info["server"],
                  kubeconfig=pathlib.Path(info["kubeconfig"]),
                  bin_dir=pathlib.Path(info["bin_dir"]),
                  ca_file=pathlib.Path(info["ca_file"]),
                  admin_token_file=pathlib.Path(info["admin_token_file"]),
                  etcd_url=info["etcd_url"], pid=int(info["pid"]))


def stop_pid(pid: int, *, timeout_s: float) -> None:
    """SIGTERM ``pid`` and wait for it to go (SIGKILL after ``timeout_s``)."""
    if not processes.pid_alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    try:
        processes.wait_for(f"the local cluster (pid {pid}) to stop",
                           lambda: not processes.pid_alive(pid), timeout_s=timeout_s)
    except processes.TimedOut:
        os.kill(pid, signal.SIGKILL)


def start(
    state_dir: pathlib.Path,
    *,
    bin_dir: pathlib.Path | None = None,
    detach: bool = False,
    keep: bool = False,
    timeout_s: float = 300.0,
) -> Handle:
    """Run a host for ``state_dir`` and wait until its cluster is ready.

    ``detach``: the host outlives this process (``kooper cluster up``); otherwise
    it dies with the calling thread.
    """
    bins = bin_dir or binaries.locate()
    state_dir.mkdir(parents=True, exist_ok=True)
    for name in (READY, FAILED):
        (state_dir / name).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "kooper.controlplane.host", "--state-dir", str(state_dir),
            "--bin-dir", str(bins)] + (["--keep"] if keep else [])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_source_root(), env.get("PYTHONPATH")) if p)
    log = state_dir / "logs" / "host.log"
    proc = processes.spawn(argv, log=log, env=env, tied=not detach)

    def ready() -> Handle | None:
        if (state_dir / FAILED).exists():
            proc.wait()
            raise HostError((state_dir / FAILED).read_text().strip())
        if proc.poll() is not None:
            raise HostError(f"the cluster host exited with {proc.returncode}: "
                            + processes.log_tail(log, 8))
        return read_handle(state_dir)

    try:
        handle = processes.wait_for("the local cluster", ready, timeout_s=timeout_s,
                                    interval_s=0.2)
    except BaseException:
        processes.terminate(proc, 60)
        if not keep:
            clean(state_dir)
        raise
    return dataclasses.replace(handle, process=None if detach else proc)


def _source_root() -> str:
    """The directory holding the ``kooper`` package, for child processes."""
    return str(pathlib.Path(__file__).resolve().parents[2])


@dataclasses.dataclass(slots=True)
class _Request:
    """One control request, answered by the main thread."""

    action: str
    process: str
    answer: dict[str, Any] = dataclasses.field(default_factory=dict)
    done: threading.Event = dataclasses.field(default_factory=threading.Event)


class _ControlServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: pathlib.Path, requests: queue.Queue[_Request]) -> None:
        self.requests = requests
        path.unlink(missing_ok=True)
        super().__init__(str(path), _ControlHandler)


class _ControlHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server = self.server
        assert isinstance(server, _ControlServer)
        try:
            body = json.loads(self.rfile.readline())
            request = _Request(str(body["action"]), str(body.get("process", "")))
        except (ValueError, KeyError, TypeError) as exc:
            answer: dict[str, Any] = {"ok": False, "error": f"bad request: {exc}"}
        else:
            server.requests.put(request)
            request.done.wait()
            answer = request.answer
        self.wfile.write(json.dumps(answer).encode() + b"\n")


def _carry_out(plane: cluster.ControlPlane, request: _Request) -> None:
    """Do ``request`` (on the main thread) and answer it."""
    try:
        if request.action == "kill":
            plane.kill(request.process)
        elif request.action == "restart":
            plane.restart(request.process)
        elif request.action != "pids":
            raise HostError(f"unknown action {request.action!r}")
        request.answer = {"ok": True, "pids": plane.pids()}
    except errors.KooperError as exc:
        request.answer = {"ok": False, "error": str(exc)}
    finally:
        request.done.set()


def serve(state_dir: pathlib.Path, bin_dir: pathlib.Path, *, keep: bool) -> int:
    """The host's body: start, report ready, wait for a signal, stop, clean up."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    plane = cluster.ControlPlane(state_dir=state_dir, bin_dir=bin_dir)
    node: kubelet.Kubelet | None = None
    runner: threading.Thread | None = None
    requests: queue.Queue[_Request] = queue.Queue()
    control: _ControlServer | None = None
    started = time.monotonic()
    failed = False
    try:
        plane.start()
        p = plane.certs
        assert p is not None
        node = kubelet.Kubelet(plane.api("kubelet"), state_dir=state_dir, api_host=plane.api_host,
                               api_port=plane.api_port,
                               ca_file=p.ca_cert, python_path=[_source_root()])
        # The kubelet's loop starts the pods, tied to its thread: it must live until the end.
        runner = threading.Thread(target=node.run, name="kubelet")
        runner.start()
        control = _ControlServer(state_dir / CONTROL, requests)
        threading.Thread(target=control.serve_forever, name="control", daemon=True).start()
        info = {"server": plane.server, "kubeconfig": str(plane.kubeconfig),
                "bin_dir": str(bin_dir), "ca_file": str(p.ca_cert),
                "admin_token_file": str(p.token_path("admin")), "pid": os.getpid(),
                "etcd_url": f"http://127.0.0.1:{plane.etcd_port}",
                "started_s": round(time.monotonic() - started, 2)}
        tmp = state_dir / (READY + ".tmp")
        tmp.write_text(json.dumps(info, indent=2) + "\n")
        tmp.replace(state_dir / READY)
        while not stop.is_set():
            with contextlib.suppress(queue.Empty):
                _carry_out(plane, requests.get(timeout=1.0))
            plane.check_alive()
            if not runner.is_alive():
                raise HostError("the kubelet stand-in stopped")
        return 0
    except errors.KooperError as exc:
        failed = True
        (state_dir / FAILED).write_text(f"{exc}\n")
        print(f"kooper local cluster: {exc}", file=sys.stderr)
        return 2
    finally:
        if control is not None:
            control.shutdown()
            control.server_close()
        if node is not None:
            node.stop()
        if runner is not None:
            runner.join()
        plane.stop()
        (state_dir / READY).unlink(missing_ok=True)
        if not keep and not failed:  # a failed start is cleaned by ``start`` after reading it
            clean(state_dir)


def clean(state_dir: pathlib.Path) -> None:
    """Remove everything the cluster wrote (the directory itself too)."""
    shutil.rmtree(state_dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kooper.controlplane.host")
    parser.add_argument("--state-dir", type=pathlib.Path, required=True)
    parser.add_argument("--bin-dir", type=pathlib.Path, required=True)
    parser.add_argument("--keep", action="store_true", help="keep the state directory")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    return serve(args.state_dir, args.bin_dir, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
