"""``kooper status`` against the embedded cluster, through the CLI."""

from __future__ import annotations

from tests.shell.conftest import make_connector, make_group, settled, wait_for

from kooper import cli


def test_status_prints_members_and_their_resources(emulated, fleet, operator, monkeypatch,
                                                   capsys):
    make_group(emulated)
    make_connector(emulated, "A", 3)
    fleet.add("w-0")
    fleet.add("w-1")
    wait_for(lambda: settled(fleet, emulated, resources=4, members=2), what="settle")
    monkeypatch.setenv("KOOPER_KUBE_API", emulated.url)
    assert cli.main(["status", "wg", "-n", "default"]) == 0
    out = capsys.readouterr().out
    assert "WorkerGroup default/wg" in out
    assert "Ready=True" in out
    lines = [line for line in out.splitlines() if line.startswith("w-")]
    assert len(lines) == 2
    assert sum(int(line.split()[4]) for line in lines) == 3  # TASKS column
    assert "A-0" in out


def test_status_of_a_missing_group_is_one_line_and_exit_1(emulated, monkeypatch, capsys):
    monkeypatch.setenv("KOOPER_KUBE_API", emulated.url)
    assert cli.main(["status", "nope"]) == 1
    assert "not found" in capsys.readouterr().err
