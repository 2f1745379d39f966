"""Every subcommand, fed malformed input, answers with one line on stderr and a non-zero exit.

Run as a user runs it: ``python -m kooper`` in a subprocess, HOME without a kubeconfig.
Long-running commands (``run``, ``worker``, ``demo``) get input that fails before they
start. ``{tmp}`` in an argument is the test's folder, where the files below are written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.conftest import run_kooper

from kooper import cli

GARBAGE_KUBECONFIG = "garbage: [\n"
ONE_CONTEXT_KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: only
contexts: [{name: only, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
"""


def write_inputs(folder: Path) -> None:
    """The malformed files the cases below name."""
    (folder / "binary.json").write_bytes(bytes(range(256)) * 4)
    (folder / "utf16.json").write_bytes('{"rounds": [{}]}'.encode("utf-16"))
    (folder / "broken.json").write_text('{"rounds": [', encoding="utf-8")
    (folder / "list.json").write_text("[1, 2]", encoding="utf-8")
    (folder / "policy.json").write_text(json.dumps({"policy": "kip-415", "rounds": [{}]}),
                                        encoding="utf-8")
    one_member = {"workers": {"W1": {}}}
    for name, doc in (
            ("expect-typo", {**one_member, "rounds": [{"expect": {"W1": {"delay": 0}}}]}),
            ("expect-text", {**one_member, "rounds": [{"expect": {"W1": {"delay_ms": "0"}}}]}),
            ("expect-list", {**one_member, "rounds": [{"expect": {"W1": {"assigned": ["A"]}}}]}),
            ("event-typo", {"rounds": [{"before": [
                {"type": "worker_join", "worker": "W1", "owend": {"connectors": ["A"]}}]}]}),
            ("advance-to", {**one_member, "rounds": [{"before": [
                {"type": "advance_time", "to": "noon"}]}]}),
            ("tasks-max", {"connectors": {"A": 10001}, "rounds": [{}]})):
        (folder / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")
    (folder / "nested.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    (folder / "garbage.kubeconfig").write_text(GARBAGE_KUBECONFIG, encoding="utf-8")
    (folder / "one.kubeconfig").write_text(ONE_CONTEXT_KUBECONFIG, encoding="utf-8")
    (folder / "folder").mkdir()


OK_SCENARIO = str(Path(__file__).resolve().parents[1] / "scenarios/kip415/worker_bounces.json")

# (case id, arguments, environment, words the one line must contain)
CASES: list[tuple[str, list[str], dict[str, str], list[str]]] = [
    ("unknown-command", ["bogus"], {}, ["invalid choice"]),
    ("unknown-flag", ["--bogus"], {}, ["--bogus"]),
    ("version-bad-output", ["version", "-o", "xml"], {}, ["-o/--output", "xml"]),
    ("version-extra-argument", ["version", "extra"], {}, ["unrecognized", "extra"]),
    # replay
    ("replay-no-file", ["replay"], {}, ["scenario"]),
    ("replay-missing-file", ["replay", "{tmp}/nope.json"], {}, ["No such file"]),
    ("replay-folder", ["replay", "{tmp}/folder"], {}, ["Is a directory"]),
    ("replay-binary", ["replay", "{tmp}/binary.json"], {}, ["not UTF-8"]),
    ("replay-utf16", ["replay", "{tmp}/utf16.json"], {}, ["UTF-16", "UTF-8"]),
    ("replay-broken-json", ["replay", "{tmp}/broken.json"], {}, ["not valid JSON", "line 1"]),
    ("replay-not-an-object", ["replay", "{tmp}/list.json"], {}, ["expected dict"]),
    ("replay-bad-policy", ["replay", "{tmp}/policy.json"], {}, ["'kip-415'", "'kip415'",
                                                               "'kooper'"]),
    ("replay-expect-unknown-field", ["replay", "--check", "{tmp}/expect-typo.json"], {},
     ["{tmp}/expect-typo.json", "round 1.expect.W1", "unknown field 'delay'"]),
    ("replay-expect-delay-as-text", ["replay", "--check", "{tmp}/expect-text.json"], {},
     ["{tmp}/expect-text.json", "round 1.expect.W1.delay_ms", "expected int, got str"]),
    ("replay-expect-resources-as-list", ["replay", "{tmp}/expect-list.json"], {},
     ["{tmp}/expect-list.json", "round 1.expect.W1.assigned", "expected dict"]),
    ("replay-event-unknown-field", ["replay", "{tmp}/event-typo.json"], {},
     ["round 1.before[0]", "unknown field 'owend'"]),
    ("replay-advance-to-unknown", ["replay", "{tmp}/advance-to.json"], {},
     ["round 1.before[0].to", "'noon'", "'deadline'"]),
    ("replay-more-tasks-than-the-crd", ["replay", "{tmp}/tasks-max.json"], {},
     ["connectors.A", "10000", "10001"]),
    ("replay-nested-too-deeply", ["replay", "{tmp}/nested.json"], {},
     ["{tmp}/nested.json", "nested too deeply"]),
    ("replay-bad-output", ["replay", OK_SCENARIO, "-o", "xml"], {}, ["xml"]),
    # drill
    ("drill-no-scenario", ["drill"], {}, ["SCENARIO"]),
    ("drill-unknown-scenario", ["drill", "nope", "--sim"], {}, ["invalid choice", "nope"]),
    ("drill-without-sim", ["drill", "kill-one"], {}, ["--sim"]),
    ("drill-negative-pods", ["drill", "kill-one", "--sim", "--pods", "-5"], {},
     ["--pods", "-5"]),
    ("drill-negative-connectors", ["drill", "kill-one", "--sim", "--connectors", "-1"], {},
     ["--connectors", "-1"]),
    ("drill-negative-tasks", ["drill", "kill-one", "--sim", "--tasks", "-1"], {}, ["--tasks"]),
    ("drill-negative-delay", ["drill", "kill-one", "--sim", "--delay=-100ms"], {},
     ["--delay", "-100ms"]),
    ("drill-delay-without-unit", ["drill", "kill-one", "--sim", "--delay", "300"], {},
     ["--delay", "'300' is not a duration"]),
    ("drill-pods-not-a-number", ["drill", "kill-one", "--sim", "--pods", "many"], {},
     ["--pods", "many"]),
    ("drill-more-tasks-than-the-crd", ["drill", "kill-one", "--sim", "--tasks", "10001"], {},
     ["--tasks", "at most 10000", "10001"]),
    ("drill-runs-outside-chaos", ["drill", "kill-one", "--sim", "--runs", "5"], {},
     ["--runs", "chaos"]),
    ("drill-jobs-zero", ["drill", "chaos", "--sim", "--jobs", "0"], {}, ["--jobs", "0"]),
    ("drill-runs-zero", ["drill", "chaos", "--sim", "--runs", "0"], {}, ["--runs", "0"]),
    ("drill-out-missing-folder",
     ["drill", "kill-one", "--sim", "--out", "{tmp}/nonexistent/dir/x.jsonl"], {},
     ["--out", "nonexistent/dir", "does not exist"]),
    ("drill-out-bad-suffix", ["drill", "kill-one", "--sim", "--out", "{tmp}/x.csv"], {},
     [".jsonl"]),
    ("drill-out-with-chaos", ["drill", "chaos", "--sim", "--out", "{tmp}/x.jsonl"], {},
     ["--out", "chaos"]),
    # demo (each fails before a cluster starts)
    ("demo-zero-pods", ["demo", "--pods", "0"], {}, ["--pods"]),
    ("demo-unknown-run", ["demo", "--runs", "eager"], {}, ["--runs"]),
    ("demo-negative-restart", ["demo", "--restart", "-1"], {}, ["--restart"]),
    ("demo-negative-delay", ["demo", "--max-delay", "-1"], {}, ["--max-delay"]),
    ("demo-out-missing-folder", ["demo", "--out", "{tmp}/nonexistent/dir/out"], {},
     ["--out", "does not exist"]),
    # analyze (fails before Spark starts)
    ("analyze-no-events", ["analyze"], {}, ["EVENTS"]),
    ("analyze-bad-conf", ["analyze", "{tmp}/list.json", "--conf", "novalue"], {}, ["--conf"]),
    # run (each fails before kopf starts)
    ("run-no-credentials", ["run"], {}, ["no Kubernetes credentials"]),
    ("run-port-out-of-range", ["run", "--metrics-port", "99999"], {}, ["--metrics-port",
                                                                       "99999"]),
    ("run-negative-health-port", ["run", "--health-port", "-1"], {}, ["--health-port"]),
    ("run-negative-debounce", ["run", "--debounce", "-1"], {}, ["--debounce", "-1"]),
    ("run-same-ports", ["run", "--metrics-port", "9000", "--health-port", "9000"], {},
     ["two ports"]),
    ("run-garbage-kubeconfig", ["run"], {"KUBECONFIG": "{tmp}/garbage.kubeconfig"},
     ["garbage.kubeconfig", "not valid YAML", "line"]),
    ("run-missing-kubeconfig", ["run", "--kubeconfig", "{tmp}/nope"], {}, ["{tmp}/nope"]),
    ("run-unknown-context", ["run", "--kubeconfig", "{tmp}/one.kubeconfig", "--context", "x"],
     {}, ["no context 'x'", "only"]),
    ("run-unreachable-api", ["run", "--kubeconfig", "{tmp}/one.kubeconfig"], {},
     ["cannot reach the Kubernetes API at http://127.0.0.1:1"]),
    ("run-audit-log-missing-folder", ["run", "--audit-log", "{tmp}/nonexistent/a.jsonl"], {},
     ["--audit-log", "does not exist"]),
    # worker (each fails before it registers)
    ("worker-without-demo", ["worker"], {}, ["--demo"]),
    ("worker-without-pod-identity", ["worker", "--demo"], {}, ["POD_NAME"]),
    ("worker-bad-lease", ["worker", "--demo", "--lease-duration", "0s"], {}, ["--lease-duration"]),
    ("worker-bad-stop-timeout", ["worker", "--demo", "--stop-timeout=-1s"], {},
     ["--stop-timeout"]),
    ("worker-broken-timing-budget", ["worker", "--demo", "--stop-timeout", "25s"], {},
     ["stop timeout 25s", "lease duration 30s"]),
    ("worker-bad-protocols", ["worker", "--demo", "--protocols", "bogus"], {}, ["--protocols"]),
    ("worker-bad-log-level", ["worker", "--demo", "--log-level", "loud"], {}, ["--log-level"]),
    # cluster (each fails before anything starts)
    ("cluster-no-action", ["cluster"], {}, ["action"]),
    ("cluster-unknown-action", ["cluster", "start"], {}, ["action", "'start'"]),
    ("cluster-bad-timeout", ["cluster", "up", "--timeout", "-1"], {}, ["--timeout"]),
    # status
    ("status-no-group", ["status"], {}, ["group"]),
    ("status-no-credentials", ["status", "demo"], {}, ["no Kubernetes credentials"]),
    ("status-garbage-kubeconfig", ["status", "demo"],
     {"KUBECONFIG": "{tmp}/garbage.kubeconfig"}, ["garbage.kubeconfig", "not valid YAML"]),
    ("status-unknown-context", ["status", "demo", "--kubeconfig", "{tmp}/one.kubeconfig",
                                "--context", "x"], {}, ["no context 'x'"]),
    ("status-unreachable-api", ["status", "demo", "--kubeconfig", "{tmp}/one.kubeconfig"], {},
     ["cannot reach the Kubernetes API at http://127.0.0.1:1"]),
    ("status-bad-output", ["status", "demo", "-o", "xml"], {}, ["xml"]),
]


def test_the_cases_cover_every_subcommand():
    assert {args[0] for _, args, _, _ in CASES if args[0] in cli.COMMANDS} == set(cli.COMMANDS)


IN_A_POD = Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
"""Inside a pod the service account is found first: no "no credentials" or kubeconfig errors."""
WITHOUT_A_SERVICE_ACCOUNT = {"run-no-credentials", "status-no-credentials",
                             "run-garbage-kubeconfig", "status-garbage-kubeconfig"}


@pytest.mark.parametrize(("args", "env", "words"), [
    pytest.param(*case[1:], id=case[0], marks=pytest.mark.skipif(
        IN_A_POD and case[0] in WITHOUT_A_SERVICE_ACCOUNT, reason="runs in a pod"))
    for case in CASES
])
def test_malformed_input_is_one_line_on_stderr_and_a_non_zero_exit(
        args: list[str], env: dict[str, str], words: list[str], tmp_path: Path):
    write_inputs(tmp_path)
    home = tmp_path / "home"
    home.mkdir()

    def fill(text: str) -> str:
        return text.replace("{tmp}", str(tmp_path))

    done = run_kooper([fill(a) for a in args], home=home,
                      env={k: fill(v) for k, v in env.items()}, cwd=tmp_path)
    assert done.code != 0
    assert done.code != cli.INTERNAL_ERROR, done.err
    assert "Traceback" not in done.err
    lines = done.err.splitlines()
    assert len(lines) == 1, done.err
    assert lines[0].startswith("kooper")
    assert " error: " in lines[0]
    for word in words:
        assert fill(word) in lines[0]
    assert not (tmp_path / "nonexistent").exists()  # nothing created behind the user's back
    assert not (tmp_path / "x.jsonl").exists()
