"""The CLI's contract: a user error is one line on stderr and exit 1, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kooper import cli


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "/nonexistent/scenario.json"],
         "kooper replay: error: /nonexistent/scenario.json: No such file or directory"),
        (["worker"], "kooper worker: error: only the demo connectors are built in"),
    ],
)
def test_a_user_error_is_one_line_and_exit_1(argv: list[str], message: str, capsys):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_directory_where_a_file_is_expected_is_one_line(tmp_path: Path, capsys):
    assert cli.main(["replay", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"kooper replay: error: {tmp_path}: Is a directory\n"


def test_a_bad_flag_is_one_line_naming_it_and_where_to_read_more(capsys):
    assert cli.main(["drill", "kill-one", "--sim", "--pods", "-5"]) == 1
    assert capsys.readouterr().err == (
        "kooper drill: error: argument --pods: must be at least 1, got -5; "
        "see 'kooper drill --help'\n")


def test_a_bug_is_one_line_exit_70_and_the_traceback_only_when_asked(monkeypatch, capsys):
    from kooper.commands import version

    def broken(_: object) -> int:
        raise RuntimeError("an\nunexpected\nstate")

    monkeypatch.setattr(version, "run", broken)
    assert cli.main(["version"]) == cli.INTERNAL_ERROR
    assert capsys.readouterr().err == (
        "kooper version: internal error: RuntimeError: an unexpected state "
        "(a bug: KOOPER_DEBUG=1 shows the traceback)\n")
    monkeypatch.setenv("KOOPER_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["version"])


@pytest.mark.parametrize("argv", [["--no-such-flag"], ["replay", "--no-such-flag", "x.json"],
                                  ["no-such-command"]])
def test_an_unknown_flag_or_command_exits_1_like_kubectl_and_helm(argv: list[str], capsys):
    assert cli.main(argv) == cli.USAGE_ERROR == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "error:" in err
