"""The CLI's contract: a user error is one line on stderr and exit 2, never a traceback."""

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
def test_a_user_error_is_one_line_and_exit_2(argv: list[str], message: str, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_directory_where_a_file_is_expected_is_one_line(tmp_path: Path, capsys):
    assert cli.main(["replay", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"kooper replay: error: {tmp_path}: Is a directory\n"
