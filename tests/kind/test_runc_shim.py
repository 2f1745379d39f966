"""hack/kind/runc-shim.py: drops the capabilities the host cannot grant, nothing else."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

SHIM = pathlib.Path(__file__).resolve().parents[2] / "hack" / "kind" / "runc-shim.py"


@pytest.fixture
def shim(monkeypatch):
    spec = importlib.util.spec_from_file_location("runc_shim", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "missing", lambda: {"CAP_SYS_RESOURCE"})
    return module


CAPS = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]


def test_create_strips_the_missing_capability_from_every_set_of_the_bundle(shim, tmp_path,
                                                                           monkeypatch):
    config = {"process": {"capabilities": {k: list(CAPS) for k in
                                           ("bounding", "effective", "permitted")}},
              "root": {"path": "rootfs"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    calls = []
    monkeypatch.setattr(shim.os, "execv", lambda path, argv: calls.append(argv))
    shim.main(["shim", "--root", "/run/x", "create", "--bundle", str(tmp_path), "box"])
    edited = json.loads((tmp_path / "config.json").read_text())
    assert all(v == ["CAP_CHOWN", "CAP_SYS_ADMIN"]
               for v in edited["process"]["capabilities"].values())
    assert edited["root"] == {"path": "rootfs"}
    assert calls == [[shim.RUNC, "--root", "/run/x", "create", "--bundle", str(tmp_path), "box"]]


def test_exec_strips_it_from_the_process_file(shim, tmp_path, monkeypatch):
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["sh"], "capabilities": {"bounding": list(CAPS)}}))
    monkeypatch.setattr(shim.os, "execv", lambda path, argv: None)
    shim.main(["shim", "exec", "--process", str(process), "box"])
    assert json.loads(process.read_text())["capabilities"]["bounding"] == [
        "CAP_CHOWN", "CAP_SYS_ADMIN"]


def test_other_commands_pass_through_untouched(shim, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(shim.os, "execv", lambda path, argv: calls.append(argv))
    shim.main(["shim", "state", "box"])
    assert calls == [[shim.RUNC, "state", "box"]]


def test_the_missing_set_is_read_from_the_bounding_set(tmp_path):
    spec = importlib.util.spec_from_file_location("runc_shim_real", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.missing() <= {"CAP_" + n for n in module.CAP_NAMES}
