"""Child processes that die with their parent, free loopback ports, waiting on a condition."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import pathlib
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from kooper.core import errors

T = TypeVar("T")
PR_SET_PDEATHSIG = 1


class TimedOut(errors.KooperError):
    """A condition did not hold in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_loopback_address(port: int, *, attempts: int = 50) -> str:
    """A random 127.x.y.z address on which nobody listens on ``port``."""
    for _ in range(attempts):
        address = "127." + ".".join(str(random.randint(1, 254)) for _ in range(3))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((address, port))
            except OSError:
                continue
            return address
    raise errors.KooperError(f"no free loopback address for port {port}")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(
    argv: Sequence[str],
    *,
    log: pathlib.Path,
    env: Mapping[str, str] | None = None,
    cwd: pathlib.Path | None = None,
    tied: bool = True,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with stdout and stderr appended to ``log``, in its own session.

    ``tied``: the kernel SIGKILLs it when the thread that started it ends, so a
    crashed parent leaves no process behind (start tied children from a thread
    that lives as long as they should).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent if tied else None,  # noqa: PLW1509
        )


def terminate(process: subprocess.Popen[bytes], grace_s: float) -> bool:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL; whether it exited within the grace."""
    if process.poll() is not None:
        return True
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False
    return True


def wait_for(
    what: str,
    check: Callable[[], T | None],
    *,
    timeout_s: float,
    interval_s: float = 0.1,
    alive: Callable[[], None] = lambda: None,
) -> T:
    """Poll ``check`` until it returns something truthy; ``alive`` raises if a process died."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive()
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimedOut(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


def log_tail(path: pathlib.Path, lines: int = 3) -> str:
    """The last lines of a log, for an error message that points at it."""
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return " | ".join(text[-lines:]) + f" (log: {path})"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one another user owns counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
