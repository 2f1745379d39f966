"""The short demo end to end: emulator, real operator, real worker processes (~1-2 min)."""

import importlib.util

import pytest

from kooper import cli
from kooper.demo import drill


@pytest.mark.skipif(importlib.util.find_spec("kooper.commands.worker") is None,
                    reason="kooper worker (the SDK's command) is not built yet")
def test_short_demo_converges_without_overlaps_and_cooperative_pauses_less(
        tmp_path, capsys, monkeypatch):
    results = []
    original = drill.run_one

    def keep(*args, **kwargs):
        result = original(*args, **kwargs)
        results.append(result)
        return result

    monkeypatch.setattr(drill, "run_one", keep)
    assert cli.main(["demo", "--short", "--out", str(tmp_path),
                     "--runs", "compatible-kooper,eager-kooper"]) == 0
    table = capsys.readouterr().out
    assert "total pause" in table
    by_name = {r.name: r.scores for r in results}
    for scores in by_name.values():
        assert scores.overlaps == 0
        assert scores.running_at_end == scores.resources == 2 + 4 + 4
    assert by_name["compatible-kooper"].total_pause_ms < by_name["eager-kooper"].total_pause_ms
    assert (tmp_path / "demo-running.png").stat().st_size > 0
    assert (tmp_path / "compatible-kooper.events.jsonl").stat().st_size > 0
