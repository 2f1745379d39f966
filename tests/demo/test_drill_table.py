import dataclasses
import pathlib

from kooper.demo import drill
from kooper.sim import metrics

BASE = metrics.RunMetrics(run="r", protocol="", policy="", events=0, resources=19,
                          total_pause_ms=12_345, max_pause_ms=2_500, undisturbed_resources=0,
                          undisturbed_pause_ms=0, moves=3, overlaps=0, rounds=7,
                          converge_ms=20_000, running_at_end=18)


def result(name, **fields):
    return drill.RunResult(name=name, protocol="", policy="", rows=(), start_ms=0, end_ms=1,
                           metrics=dataclasses.replace(BASE, **fields), resources=19,
                           log_path=pathlib.Path("x"))


def test_the_table_shows_one_row_per_run_in_seconds_and_running_over_wanted():
    table = drill.format_table([result("compatible-kooper"),
                                result("eager-kooper", converge_ms=None,
                                       total_pause_ms=24_690)]).splitlines()
    assert table[0].split() == ["run", "total", "pause", "vs", "eager", "longest", "rounds",
                                "moves", "converge", "overlaps", "running"]
    assert table[2].split() == ["compatible-kooper", "12.3s", "0.50", "2.5s", "7", "3",
                                "20.0s", "0", "18/19"]
    assert table[3].split()[2] == "1.00"
    assert table[3].split()[6] == "-"  # no disruption in the window: no convergence time


def test_without_an_eager_run_the_ratio_column_says_so():
    table = drill.format_table([result("compatible-kooper")]).splitlines()
    assert table[2].split()[2] == "-"


def test_balance_counts_connector_instances_and_tasks_separately():
    def running(placement):
        return {("g", resource): {member} for resource, member in placement.items()}

    members = ["a", "b"]
    assert drill._balanced(running({"A": "a", "B": "b", "A-0": "a", "A-1": "b"}),
                           members=members)
    # Two tasks against none: unbalanced, although each member runs two resources.
    assert not drill._balanced(running({"A": "a", "B": "a", "A-0": "b", "A-1": "b"}),
                               members=members)
    # A member that runs nothing yet counts as empty.
    assert not drill._balanced(running({"A-0": "a", "A-1": "a"}), members=members)
