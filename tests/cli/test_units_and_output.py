"""People read seconds with units; programs read exact milliseconds under *_ms keys."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from kooper import cli
from kooper.commands import options, replay, status
from kooper.control import replay as core_replay
from kooper.core import events as ev
from kooper.core import model
from kooper.protocol import codec, messages
from kooper.sim import metrics, runner, scenarios

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests/scenarios/kip415/worker_bounces.json"
SECONDS = re.compile(r"^\d+\.\d s$")


def test_seconds_carry_their_unit():
    assert options.seconds(647_621) == "647.6 s"
    assert options.seconds(0) == "0.0 s"
    assert options.seconds(None) == "-"


def _simulated(pods: int = 4, connectors: int = 3, tasks: int = 4) -> metrics.RunMetrics:
    config = runner.Config(pods=pods, connectors=connectors, tasks=tasks, seed=3)
    result = runner.simulate(config, scenarios.build("kill-one", pods))
    return metrics.run_metrics(result.events)


def test_the_drill_table_prints_every_duration_in_seconds(capsys):
    assert cli.main(["drill", "kill-one", "--sim", "--pods", "4", "--seed", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = re.split(r"\s{2,}", out[0].strip())
    row = re.split(r"\s{2,}", out[1].strip())
    cells = dict(zip(header, row, strict=True))
    for column in ("total pause", "longest pause", "undisturbed pause", "converge"):
        assert SECONDS.match(cells[column]), (column, cells[column])
    expected = _simulated()
    assert cells["total pause"] == options.seconds(expected.total_pause_ms)
    assert cells["converge"] == options.seconds(expected.converge_ms)
    assert "_ms" not in "\n".join(out)
    assert re.search(r"simulated in \d+\.\d\d s", out[2])


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_the_drill_document_keeps_exact_milliseconds(output: str, capsys):
    assert cli.main(["drill", "kill-one", "--sim", "--pods", "4", "--seed", "3",
                     "-o", output]) == 0
    text = capsys.readouterr().out
    document = json.loads(text) if output == "json" else yaml.safe_load(text)
    assert document["metrics"] == dataclasses.asdict(_simulated())
    assert document["violations"] == []
    assert isinstance(document["simulated_ms"], int)


def test_the_drill_writes_its_log_into_an_existing_folder(tmp_path: Path, capsys):
    out = tmp_path / "kill.jsonl"
    assert cli.main(["drill", "kill-one", "--sim", "--pods", "3", "--out", str(out)]) == 0
    rows = ev.load_lines(out.read_text(encoding="utf-8").splitlines())
    assert {str(r.event) for r in rows} >= {"join", "start", "stop"}
    assert f"written to {out}" in capsys.readouterr().out


def test_a_scale_down_that_touches_only_idle_pods_says_why_nothing_moved(capsys):
    assert cli.main(["drill", "scale-down", "--sim", "--pods", "50"]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: nothing paused or moved: 15 resources (3 connectors x (1 + 4 tasks)) leave "
        "35 of 50 pods idle, and the drill touched only idle pods; for work on every pod "
        "pass --connectors 10"]
    assert "note" not in captured.out


def test_with_work_on_every_pod_the_scale_down_moves_work_and_needs_no_note(capsys):
    assert cli.main(["drill", "scale-down", "--sim", "--pods", "50", "--connectors", "10",
                     "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["metrics"]["moves"] > 0
    assert "note:" not in captured.err


def test_the_replay_table_prints_seconds_and_its_document_milliseconds(capsys):
    assert cli.main(["replay", str(SCENARIO)]) == 0
    table = capsys.readouterr().out
    assert re.search(r"round 3  at 100\.0 s", table)
    assert re.search(r"delay +300\.0 s", table)
    assert "ms" not in table
    assert cli.main(["replay", str(SCENARIO), "-o", "yaml"]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    result = core_replay.replay(json.loads(SCENARIO.read_text(encoding="utf-8")))
    assert document == core_replay.to_json(result)
    assert cli.main(["replay", str(SCENARIO), "--format", "json"]) == 0  # the old spelling
    assert json.loads(capsys.readouterr().out) == document
    assert replay.table(result) == table.rstrip("\n")


def test_a_utf8_file_with_a_byte_order_mark_is_read(tmp_path: Path, capsys):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + SCENARIO.read_bytes())
    assert cli.main(["replay", str(path)]) == 0
    assert "round 1" in capsys.readouterr().out


def _configmap(member: str, assigned: model.ConnectorsAndTasks, revoked: model.ConnectorsAndTasks
               ) -> dict[str, object]:
    text = codec.encode_assignment(messages.Assignment(
        group="wg", member=member, generation=4, protocol=model.Protocol.COMPATIBLE,
        assigned=assigned, revoked=revoked))
    return {"metadata": {"name": f"wg-{member}", "labels": {"kooper.dev/member": member}},
            "data": {messages.CONFIGMAP_KEY: text}}


def test_the_status_document_has_every_member_and_exact_numbers():
    group = {"metadata": {"namespace": "ns", "name": "wg"},
             "status": {"rebalanceGeneration": 4, "protocol": "compatible",
                        "members": {"count": 2}, "connectors": 1, "tasks": 3, "unassigned": 1,
                        "delay": {"remainingSeconds": 12.5, "lost": ["w-2"]},
                        "conditions": [{"type": "Ready", "status": "False",
                                        "reason": "Delayed", "message": "waiting"}]}}
    configmaps = [
        _configmap("w-1", model.ConnectorsAndTasks.of([], ["A-1", "A-2"]), model.EMPTY),
        _configmap("w-0", model.ConnectorsAndTasks.of(["A"], ["A-0"]),
                   model.ConnectorsAndTasks.of([], ["A-2"])),
    ]
    document = status.document(group, configmaps, [])
    assert document["delay"] == {"remaining_ms": 12_500, "lost": ["w-2"]}
    assert document["conditions"][0]["reason"] == "Delayed"
    assert document["assignments"] == [
        {"member": "w-0", "applied_generation": None, "generation": 4, "connectors": ["A"],
         "tasks": ["A-0"], "revoking": ["A-2"]},
        {"member": "w-1", "applied_generation": None, "generation": 4, "connectors": [],
         "tasks": ["A-1", "A-2"], "revoking": []},
    ]
    table = status.render(group, configmaps, [])
    assert "delay 12.5 s left" in table



def _lease(member: str, generation: int) -> dict[str, object]:
    text = codec.encode_report(messages.Report(
        member=member, incarnation="i", protocols=frozenset({model.Protocol.COMPATIBLE}),
        generation=generation))
    return {"metadata": {"labels": {"kooper.dev/member": member},
                         "annotations": {messages.REPORT_ANNOTATION: text}}}


def test_status_counts_a_revocation_as_revoking_only_until_the_member_reports_it():
    # A round does not rewrite a document whose member acknowledged its revocations
    # (docs/protocol.md): its `revoked` then names work already stopped. On kind, after
    # the examples balanced, `kooper status` printed REVOKING 4 for such a member of a
    # Ready, Converged group.
    group = {"metadata": {"namespace": "ns", "name": "wg"}, "status": {}}
    configmaps = [_configmap("w-0", model.ConnectorsAndTasks.of(["A"], ["A-0"]),
                             model.ConnectorsAndTasks.of([], ["A-1", "A-2"]))]
    pending = status.document(group, configmaps, [_lease("w-0", 3)])
    assert pending["assignments"][0]["revoking"] == ["A-1", "A-2"]
    assert status.render(group, configmaps, [_lease("w-0", 3)]).splitlines()[-1].split()[5] == "2"
    done = status.document(group, configmaps, [_lease("w-0", 4)])
    assert done["assignments"][0]["revoking"] == []
    assert status.render(group, configmaps, [_lease("w-0", 4)]).splitlines()[-1].split()[5] == "0"
