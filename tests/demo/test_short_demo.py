"""The short demo end to end: emulator, real operator, real worker processes (~30 s).

The two runs go side by side (the command's default), each in its thread.
"""

import threading

from kooper import cli
from kooper.demo import drill


def test_short_demo_converges_without_overlaps_and_cooperative_pauses_less(
        tmp_path, capsys, monkeypatch):
    results = []
    statuses = []
    original = drill.run_one
    one_at_a_time = threading.Lock()  # KOOPER_KUBE_API is process-wide

    def keep(*args, **kwargs):
        def status(embedded):
            # `kooper status` against the converged embedded cluster, as --keep offers.
            with one_at_a_time:
                monkeypatch.setenv("KOOPER_KUBE_API", embedded.url)
                statuses.append(cli.main(["status", drill.GROUP]))

        kwargs["converged"] = status
        result = original(*args, **kwargs)
        results.append(result)
        return result

    monkeypatch.setattr(drill, "run_one", keep)
    # A 1 s restart: the cooperative pauses (about a restart each) stay well below
    # eager's (a stop and a start per round) even on a loaded machine.
    assert cli.main(["demo", "--short", "--restart", "1", "--out", str(tmp_path),
                     "--runs", "compatible-kooper,eager-kooper"]) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "total pause" in printed
    assert "kooper demo: 3 pods" in captured.err  # progress on stderr, results on stdout
    assert "kooper demo:" not in printed
    assert statuses == [0, 0]
    assert "workers-0" in printed  # a member row of `kooper status`
    for result in results:
        assert result.metrics.overlaps == 0
        assert result.metrics.running_at_end == result.resources == 2 + 4 + 4
    by_name = {r.name: r.metrics for r in results}
    assert by_name["compatible-kooper"].total_pause_ms < by_name["eager-kooper"].total_pause_ms
    # A restarted pod leaves gracefully (terminating, its worker deletes its Lease): a
    # planned departure, whose work is handed over at once (control.departures) rather
    # than waiting for the pod; overlaps stay 0 (above).
    assert (tmp_path / "demo-running.png").stat().st_size > 0
    assert (tmp_path / "compatible-kooper.events.jsonl").stat().st_size > 0
