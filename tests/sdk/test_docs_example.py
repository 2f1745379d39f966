"""The 20-line worker of docs/sdk.md, run as a process against the emulator."""

import os
import queue
import re
import signal
import subprocess
import sys
import threading

import pytest
from tests.sdk.worker_helpers import NS, POD, assign, at_generation, report, wait_for

pytest.importorskip("kmock")


def example_source(repo_root):
    text = (repo_root / "docs" / "sdk.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)


def test_the_docs_example_is_about_twenty_lines(repo_root):
    assert len(example_source(repo_root).strip().splitlines()) <= 24


def test_the_docs_example_joins_runs_its_assignment_and_leaves_on_sigterm(api, repo_root,
                                                                          tmp_path):
    script = tmp_path / "my_worker.py"
    script.write_text(example_source(repo_root))
    env = dict(os.environ, KOOPER_KUBE_API=api.url, POD_NAME=POD, POD_NAMESPACE=NS,
               POD_UID=api.pod_uid, PYTHONPATH=str(repo_root / "operator"))
    errors = (tmp_path / "stderr.txt").open("w")
    process = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                               stderr=errors, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout],
                     daemon=True).start()
    try:
        wait_for(lambda: report(api), timeout=20, what="the example joined")
        assign(api, 1, [], ["A-0"], epochs={"A-0": 3})
        assert lines.get(timeout=10).strip() == "started A-0 at epoch 3"
        wait_for(lambda: at_generation(api, 1), what="the example applied generation 1")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
        errors.close()
    assert process.returncode == 0, (tmp_path / "stderr.txt").read_text()
    assert api.get("leases", f"kooper-{POD}", namespace=NS) is None


def test_the_health_server_the_guide_calls_is_reachable_from_the_package_alone(repo_root):
    # docs/sdk.md, "Health and metrics": `sdk.health.serve(..., metrics=worker.metrics.render)`
    # after nothing but `from kooper import sdk` (a fresh interpreter: in this one, other
    # tests have imported kooper.sdk.health already).
    probe = "from kooper import sdk; print(sdk.health.serve.__name__, sdk.metrics.__name__)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(repo_root / "operator")),
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["serve", "kooper.sdk.metrics"]
