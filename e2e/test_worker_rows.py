"""The kind drills' reading of the workers' own files (e2e/worker_rows.py), offline."""

from __future__ import annotations

import json
import re

import pytest

from e2e import chaos_log, worker_rows
from kooper.core import events


def row(ts, member, resource, event, epoch=1):
    return json.dumps({"ts_ms": ts, "run": "", "group": "demo", "member": member,
                       "resource": resource, "event": event, "generation": 1, "epoch": epoch})


def json_event(*args, **kwargs):
    return events.Event.from_row(json.loads(row(*args, **kwargs)))


def write(directory, pod, uid, started_ns, *lines):
    path = directory / f"kooper.{pod}.{uid}.{started_ns}.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_a_file_names_its_pod_and_incarnation_even_when_the_pod_name_has_dots(tmp_path):
    write(tmp_path, "w.example-0", "u1", 5_000_000)
    (found,) = worker_rows.incarnations(tmp_path, "kooper")
    assert (found.pod, found.uid, found.name, found.started_ms) == (
        "w.example-0", "u1", "w.example-0.5000000", 5)


def test_other_namespaces_files_are_not_read(tmp_path):
    write(tmp_path, "w-0", "u1", 1)
    (tmp_path / "other.w-0.u1.2.jsonl").write_text(row(1, "w-0", "a", "start") + "\n")
    assert list(worker_rows.read(tmp_path, "kooper")) == ["w-0.1"]


def test_a_line_cut_short_by_a_sigkill_is_skipped(tmp_path):
    write(tmp_path, "w-0", "u1", 1, row(10, "w-0", "a", "start"), '{"ts_ms": 11, "ru')
    assert [r.resource for r in worker_rows.read(tmp_path, "kooper")["w-0.1"]] == ["a"]


def test_a_process_replaced_by_its_pods_next_container_exits_by_that_start(tmp_path):
    """The kubelet starts a pod's next container only once the one before exited."""
    write(tmp_path, "w-0", "u1", 1_000_000, row(1, "w-0", "a", "start"))
    write(tmp_path, "w-0", "u1", 9_000_001, row(10, "w-0", "a", "start", epoch=2))
    exits = worker_rows.exits(tmp_path, "kooper")
    assert exits == [chaos_log.ProcessRow(10, "w-0.1000000", "w-0", "exit")]  # rounded up
    runs = chaos_log.runs(worker_rows.read(tmp_path, "kooper"), exits)
    assert [(r.incarnation, r.end_ms, r.ended_by) for r in runs] == [
        ("w-0.1000000", 10, "exit"), ("w-0.9000001", chaos_log.OPEN, "open")]


def test_a_replaced_pod_object_bounds_nothing(tmp_path):
    """A force-deleted pod's process may outlive the next pod of its name: stays open."""
    write(tmp_path, "w-0", "u1", 1_000_000, row(1, "w-0", "a", "start"))
    write(tmp_path, "w-0", "u2", 9_000_000, row(10, "w-0", "a", "start", epoch=2))
    assert worker_rows.exits(tmp_path, "kooper") == []
    runs = chaos_log.runs(worker_rows.read(tmp_path, "kooper"), [])
    assert [o.resource for o in chaos_log.overlaps(runs)] == ["a"]


def test_latest_is_each_pods_newest_process(tmp_path):
    write(tmp_path, "w-0", "u1", 1)
    write(tmp_path, "w-0", "u1", 3)
    write(tmp_path, "w-1", "u9", 2)
    assert worker_rows.latest(tmp_path, "kooper", ["w-0", "w-1"]) == {"w-0": "w-0.3",
                                                                      "w-1": "w-1.2"}


def test_a_frozen_node_is_a_freeze_to_the_overlap_check():
    """``docker pause`` freezes a node's processes as SIGSTOP does one process."""
    first = chaos_log.Run("w-0", "w-0.1", "a", 0, 500, 1, "exit")
    second = chaos_log.Run("w-1", "w-1.1", "a", 200, chaos_log.OPEN, 2, "open")
    frozen = [chaos_log.ProcessRow(100, "w-0.1", "w-0", "freeze"),
              chaos_log.ProcessRow(400, "w-0.1", "w-0", "thaw")]
    (overlap,) = chaos_log.overlaps([first, second], frozen)
    assert overlap.frozen == ("w-0.1",)
    assert chaos_log.while_frozen(overlap, frozen)
    assert not chaos_log.while_frozen(overlap, frozen[:0])


def test_a_runtime_finish_time_rounds_up_to_the_millisecond():
    """An exit row bounds the exit from above, so nanoseconds round up, never down."""
    assert worker_rows.rfc3339_ms("1970-01-01T00:00:01.123000000Z") == 1123
    assert worker_rows.rfc3339_ms("1970-01-01T00:00:01.123000001Z") == 1124
    assert worker_rows.rfc3339_ms("1970-01-01T00:00:02Z") == 2000
    assert worker_rows.rfc3339_ms("2026-11-27T09:20:01.5Z") == 1795771201500


def test_the_earliest_exit_row_ends_an_open_run():
    """Every exit row is an upper bound (the runtime's finish time, the next container's
    start): a run with several ends by the earliest, whatever their order."""
    rows = {"w-0.1": [json_event(1, "w-0", "a", "start")]}
    bounds = [chaos_log.ProcessRow(900, "w-0.1", "w-0", "exit"),
              chaos_log.ProcessRow(400, "w-0.1", "w-0", "exit"),
              chaos_log.ProcessRow(700, "w-0.1", "w-0", "exit")]
    for order in (bounds, bounds[::-1]):
        [run] = chaos_log.runs(rows, order)
        assert (run.end_ms, run.ended_by) == (400, "exit")


def test_only_the_last_line_may_be_torn_any_other_bad_line_is_an_error(tmp_path):
    # A SIGKILL can cut the last line a process wrote, never one it wrote before: a bad
    # row anywhere else (a byte-order mark, a start without its member) would drop a
    # start silently, and its overlap with it. It is named by file and line instead.
    path = write(tmp_path, "w-0", "u1", 1, "\ufeff" + row(10, "w-0", "a", "start"),
                 row(20, "w-0", "a", "stop"))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:1: "):
        worker_rows.read(tmp_path, "kooper")
    path.write_text(row(10, "w-0", "a", "start") + "\n" + row(20, "", "a", "stop") + "\n"
                    + row(30, "w-0", "a", "start") + "\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:2: a stop row without"):
        worker_rows.read(tmp_path, "kooper")


def test_rows_are_split_at_newlines_only(tmp_path):
    # JSON allows U+2028 and a lone CR raw inside a string or between tokens; str.splitlines
    # cut such a row in two, and both halves were dropped as torn.
    odd = row(10, "w-0", "a\u2028b", "start").replace(', "event"', ',\r"event"')
    write(tmp_path, "w-0", "u1", 1, odd, row(20, "w-0", "a\u2028b", "stop"))
    got = worker_rows.read(tmp_path, "kooper")["w-0.1"]
    assert [(r.ts_ms, r.resource) for r in got] == [(10, "a\u2028b"), (20, "a\u2028b")]
