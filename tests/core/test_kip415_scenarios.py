"""KIP-415's scenario tables, replayed through the real assignor with ``--check``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kooper import cli
from kooper.control import replay
from kooper.core import defaults

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
KIP415 = sorted((SCENARIOS / "kip415").glob("*.json"))
KOOPER = sorted((SCENARIOS / "kooper").glob("*.json"))
GOLDEN = sorted(SCENARIOS.glob("*/*.json"))
"""Every golden scenario: KIP-415's tables, their kooper siblings, Kafka's replayed cases."""
SETTINGS = ("policy", "protocol", "max_delay_ms", "max_moves_per_round")
"""The group settings a round depends on; a golden states each, so no default decides it."""


def test_every_kip415_table_has_a_scenario_file():
    names = {path.stem for path in KIP415}
    assert names >= {
        "first_member_joins",
        "non_first_member_joins",
        "worker_leaves",
        "worker_bounces",
        "leader_leaves",
        "leader_bounces",
    }


@pytest.mark.parametrize("path", KIP415 + KOOPER, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_scenario_replays_exactly_as_its_table_says(path: Path):
    scenario = json.loads(path.read_text())
    result = replay.replay(scenario)
    assert replay.check(result) == []
    assert all(r.expect for r in result.rounds), "every round of a golden scenario is checked"


@pytest.mark.parametrize("path", KIP415 + KOOPER, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_replay_check_command_exits_zero_on_golden_scenarios(path: Path, capsys):
    assert cli.main(["replay", str(path), "--check"]) == 0


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_scenario_states_every_setting_it_depends_on(path: Path):
    scenario = json.loads(path.read_text())
    assert [s for s in SETTINGS if s not in scenario] == []


@pytest.mark.parametrize("policy_default", [None, 1, "25%"], ids=["none", "1", "25%"])
@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_scenario_replays_the_same_whatever_the_pacing_defaults(
    path: Path, policy_default, monkeypatch: pytest.MonkeyPatch
):
    # Issue 23: tasks_duplicated and worker_joins used to pass only because of kip415's
    # default; a golden pins its rounds whatever defaults.py says.
    monkeypatch.setattr(defaults, "BALANCING_MAX_MOVES_BY_POLICY",
                        {"kooper": policy_default, "kip415": policy_default})
    assert replay.check(replay.replay(json.loads(path.read_text()))) == []


def _run(name: str, policy: str) -> replay.Replay:
    scenario = json.loads((SCENARIOS / "kip415" / f"{name}.json").read_text())
    scenario["policy"] = policy
    for round_ in scenario["rounds"]:
        round_.pop("expect", None)
        for event in round_.get("before", []):
            if event.get("to") == "deadline":
                event.pop("to")
                event["ms"] = scenario["max_delay_ms"]
    return replay.replay(scenario)


def test_bounced_worker_gets_its_work_back_at_once_under_kooper_but_waits_under_kip415():
    kip = _run("worker_bounces", "kip415")
    koo = _run("worker_bounces", "kooper")
    # Round 3 is W2 rejoining within the delay.
    assert kip.rounds[2].members["W2"].assigned.sorted() == []
    assert kip.rounds[2].members["W2"].delay_ms > 0
    assert koo.rounds[2].members["W2"].assigned.sorted() == ["A-1", "B"]
    assert koo.rounds[2].members["W2"].delay_ms == 0
    assert koo.summary.unassigned_ms < kip.summary.unassigned_ms


def test_leader_bounce_restores_the_original_assignment_under_kooper():
    koo = _run("leader_bounces", "kooper")
    final = {m: r.assigned.sorted() for m, r in koo.rounds[-1].members.items()}
    assert final == {"W1": ["A", "A-0"], "W2": ["A-1", "B"], "W3": ["B-0"]}
    assert koo.summary.moves == 0


def test_malformed_scenario_gets_one_clear_line_and_exit_1(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"connectors": {"A": 1}, "rounds": [{"before": [{"type": "x"}]}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "kooper.cli", "replay", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0
    assert "round 1.before[0].type: unknown event type 'x'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"rounds": []}, "rounds: a scenario needs at least one round"),
        ({"policy": "nope", "rounds": [{}]}, "policy:"),
        ({"connectors": {"A": -1}, "rounds": [{}]}, "connectors.A: must be >= 0"),
        ({"rounds": [{"before": [{"type": "worker_leave", "worker": "W9"}]}]}, "not a member"),
        ({"workers": {"W1": {"tasks": ["nodash"]}}, "rounds": [{}]}, "is not a task id"),
        ({"rounds": [{"expect": {}, "typo": 1}]}, "round 1: unknown field 'typo'"),
        ({"max_moves_per_round": "0%", "rounds": [{}]}, "max_moves_per_round: a count"),
        ({"max_moves_per_round": 0, "rounds": [{}]}, "max_moves_per_round: a count"),
    ],
)
def test_scenario_errors_name_the_field_and_round(document, message):
    with pytest.raises(replay.ScenarioError, match=message.replace(".", r"\.")):
        replay.replay(document)


def test_check_names_the_mismatch():
    scenario = json.loads((SCENARIOS / "kip415" / "first_member_joins.json").read_text())
    scenario["rounds"][0]["expect"]["W1"]["delay_ms"] = 5
    problems = replay.check(replay.replay(scenario))
    assert problems == ["round 1: W1 delay_ms: expected 5, got 0"]


def test_json_format_has_rounds_and_summary(capsys):
    path = SCENARIOS / "kip415" / "worker_leaves.json"
    assert cli.main(["replay", str(path), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["summary"]["rounds"] == 3
    assert document["summary"]["moves"] == 2
    assert document["rounds"][1]["members"]["W1"]["delay_ms"] == 300000


def test_an_event_may_carry_a_note_and_nothing_else_unknown():
    scenario = {"connectors": {"A": 1}, "workers": {"W1": {}},
                "rounds": [{"before": [{"type": "worker_join", "worker": "W2",
                                        "note": "a second worker"}]}]}
    assert len(replay.replay(scenario).rounds) == 1
    scenario["rounds"][0]["before"][0]["nte"] = "a typo"
    with pytest.raises(replay.ScenarioError, match="unknown field 'nte'"):
        replay.replay(scenario)
