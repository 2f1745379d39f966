"""Ctrl-C is one short line and exit 130, also while a drill's worker processes run.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: the
command and every worker process it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

PARENT_INTERRUPTED = 130


def test_ctrl_c_during_a_parallel_chaos_drill_is_one_line_without_worker_tracebacks(
        tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOOPER_")}
    drill = subprocess.Popen(
        [sys.executable, "-m", "kooper", "drill", "chaos", "--sim", "--runs", "100000",
         "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        start_new_session=True)
    assert drill.stderr is not None
    try:
        first = drill.stderr.readline()  # the progress bar: the pool's runs are under way
        assert first.startswith("chaos ["), first
        os.killpg(drill.pid, signal.SIGINT)
        out, rest = drill.communicate(timeout=60)
    finally:
        if drill.poll() is None:
            os.killpg(drill.pid, signal.SIGKILL)
            drill.wait()
    assert drill.returncode == PARENT_INTERRUPTED
    assert out == ""
    assert rest == "kooper drill: interrupted\n"
