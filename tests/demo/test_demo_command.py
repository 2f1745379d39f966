import collections
import json

import pytest
from e2e import localcluster

from kooper import cli
from kooper.commands import demo
from kooper.controlplane import binaries
from kooper.core import errors


def test_runs_are_parsed_in_order_and_checked_against_known_protocols_and_policies():
    assert demo.parse_runs(" eager-kooper, compatible-kip415 ") == [
        ("eager", "kooper"), ("compatible", "kip415")]
    with pytest.raises(errors.KooperError, match="cooperative-kooper"):
        demo.parse_runs("cooperative-kooper")
    with pytest.raises(errors.KooperError, match="at least one"):
        demo.parse_runs(" , ")


def test_a_run_named_twice_is_refused_its_two_clusters_would_write_the_same_logs():
    with pytest.raises(errors.KooperError, match="--runs: 'eager-kooper' is named twice"):
        demo.parse_runs("eager-kooper,compatible-kooper, eager-kooper")


@pytest.mark.parametrize("argv", [["--runs", "eager"], ["--pods", "0"], ["--restart", "-1"]])
def test_bad_options_fail_with_one_line_before_anything_starts(argv, tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path), *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kooper demo: error: ")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_help_describes_the_drill_the_runs_and_the_outputs(capsys):
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    text = capsys.readouterr().out
    for words in ("rolling restart", "compatible-kooper,compatible-kip415,eager-kooper",
                  "demo-running.png", "--keep", "scheduledRebalanceMaxDelay"):
        assert words in " ".join(text.split()).replace("eager- kooper", "eager-kooper")


def test_the_real_control_plane_without_its_binaries_is_one_line_naming_make_kube_bins(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(binaries.BIN_DIR_ENV, str(tmp_path / "no-binaries-here"))
    assert cli.main(["demo", "--control-plane", "real", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kooper demo: error: ")
    assert "make kube-bins" in err
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_a_cluster_dir_without_the_real_control_plane_is_refused(tmp_path, capsys):
    assert cli.main(["demo", "--cluster-dir", str(tmp_path), "--out", str(tmp_path)]) == 1
    assert "--cluster-dir needs --control-plane real" in capsys.readouterr().err


@pytest.mark.realk8s
def test_the_short_demo_runs_on_the_real_control_plane(request, tmp_path_factory, tmp_path,
                                                        capsys):
    # The session's local cluster (the integration tests' and the drills'), through
    # --cluster-dir: the same code as a fresh one, without starting a second control plane.
    handle = localcluster.shared(request.config, tmp_path_factory)
    assert cli.main(["demo", "--control-plane", "real", "--cluster-dir", str(handle.state_dir),
                     "--short", "--runs", "compatible-kooper", "--out", str(tmp_path),
                     "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert "namespace demo-compatible-kooper of the local cluster" in captured.err
    (run,) = json.loads(captured.out)["runs"]
    assert run["metrics"]["overlaps"] == 0
    assert run["metrics"]["running_at_end"] == run["resources"] == 2 + 4 + 4
    rows = [json.loads(line) for line in (tmp_path / "compatible-kooper.events.jsonl").open()]
    # Every pod was deleted through the API (it left) and replaced by the StatefulSet
    # controller (the new incarnation joined): the operator's rows show it for each.
    pods = ("workers-0", "workers-1", "workers-2")
    for kind, times in (("join", 2), ("leave", 1)):
        seen = collections.Counter(row["member"] for row in rows if row["event"] == kind)
        assert {pod: seen[pod] for pod in pods} == dict.fromkeys(pods, times), kind
