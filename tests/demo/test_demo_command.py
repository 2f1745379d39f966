import pytest

from kooper import cli
from kooper.commands import demo
from kooper.core import errors


def test_runs_are_parsed_in_order_and_checked_against_known_protocols_and_policies():
    assert demo.parse_runs(" eager-kooper, compatible-kip415 ") == [
        ("eager", "kooper"), ("compatible", "kip415")]
    with pytest.raises(errors.KooperError, match="cooperative-kooper"):
        demo.parse_runs("cooperative-kooper")
    with pytest.raises(errors.KooperError, match="at least one"):
        demo.parse_runs(" , ")


@pytest.mark.parametrize("argv", [["--runs", "eager"], ["--pods", "0"], ["--restart", "-1"]])
def test_bad_options_fail_with_one_line_before_anything_starts(argv, tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path), *argv]) == 2
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
