"""The conventions every command keeps: help on every flag, a version, -o, chart defaults."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
from pathlib import Path

import pytest
import yaml

from kooper import cli
from kooper.commands import run as run_command

ROOT = Path(__file__).resolve().parents[2]


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser([], every_command=True)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_of_every_command_has_help_text():
    missing = [
        f"kooper {name} {action.option_strings or action.dest}"
        for name, sub in subparsers().items()
        for action in sub._actions
        if not isinstance(action, argparse._HelpAction)
        and (not action.help or action.help == argparse.SUPPRESS)
    ]
    assert missing == []
    assert set(subparsers()) == set(cli.COMMANDS)


def test_top_level_help_is_written_for_users(capsys):
    assert cli.main([]) == 0
    text = capsys.readouterr().out
    assert "usage: kooper" in text
    for words in ("kooper demo", "kooper run", "kooper status", "--version",
                  "seconds", "-o json|yaml", "stderr"):
        assert words in text
    # not the module's docstring for developers
    assert "kooper.commands" not in text
    assert "add_arguments" not in text


def test_version_comes_from_the_package_metadata(capsys):
    assert cli.main(["--version"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"kooper {importlib.metadata.version('kooper')} (")
    assert f"Python {platform.python_version()}" in line
    assert f"kopf {importlib.metadata.version('kopf')}" in line
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out.strip() == line


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_version_is_machine_readable(output: str, capsys):
    assert cli.main(["version", "-o", output]) == 0
    text = capsys.readouterr().out
    document = json.loads(text) if output == "json" else yaml.safe_load(text)
    assert document["kooper"] == importlib.metadata.version("kooper")
    assert document["python"] == platform.python_version()


@pytest.mark.parametrize("command", ["status", "drill", "replay", "demo", "version"])
def test_result_commands_offer_table_json_and_yaml(command: str):
    sub = subparsers()[command]
    output = next(a for a in sub._actions if "-o" in a.option_strings)
    assert list(output.choices or ()) == ["table", "json", "yaml"]
    assert output.default == "table"


@pytest.mark.parametrize("command", ["status", "run"])
def test_commands_that_talk_to_a_cluster_take_kubeconfig_and_context(command: str):
    flags = {flag for a in subparsers()[command]._actions for flag in a.option_strings}
    assert {"--kubeconfig", "--context"} <= flags


def test_operator_ports_default_to_the_charts():
    values = yaml.safe_load((ROOT / "charts/kooper/values.yaml").read_text(encoding="utf-8"))
    defaults = {a.dest: a.default for a in subparsers()["run"]._actions}
    assert defaults["metrics_port"] == values["metrics"]["port"] == run_command.METRICS_PORT
    assert defaults["health_port"] == values["operator"]["healthPort"] == run_command.HEALTH_PORT
