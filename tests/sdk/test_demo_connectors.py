"""The demo connector types: counting, committing, and pausing on a fake clock."""

import pytest

from kooper.sdk import demo


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def connectors():
    clock = Clock()
    return demo.DemoConnectors(sleep=lambda s: None, clock=clock), clock


def test_a_counter_counts_its_rate_and_commits_on_revoke_only():
    demo_connectors, clock = connectors()
    demo_connectors.on_assigned("A-0", {"records.per.second": "10"}, 1)
    demo_connectors.on_assigned("A-1", {"records.per.second": "10"}, 1)
    clock.now += 3
    assert demo_connectors.progress("A-0") == 30
    demo_connectors.on_revoked("A-0")
    demo_connectors.on_lost("A-1")
    assert demo_connectors.counted == {"A-0": 30}
    assert demo_connectors.lost == ["A-1"]


def test_a_paused_counter_counts_nothing_until_resumed():
    demo_connectors, clock = connectors()
    demo_connectors.on_assigned("A-0", {"records.per.second": "10"}, 1)
    clock.now += 2
    demo_connectors.on_paused("A-0")
    assert demo_connectors.paused() == {"A-0"}
    clock.now += 5
    assert demo_connectors.progress("A-0") == 20
    demo_connectors.on_paused("A-0")  # twice is harmless
    demo_connectors.on_resumed("A-0")
    assert demo_connectors.paused() == frozenset()
    clock.now += 1
    assert demo_connectors.progress("A-0") == 30
    demo_connectors.on_paused("A-0")
    clock.now += 4
    demo_connectors.on_revoked("A-0")  # stopped while paused: the pause is not counted
    assert demo_connectors.counted == {"A-0": 30}


def test_pausing_what_does_not_run_is_a_no_op():
    demo_connectors, _ = connectors()
    demo_connectors.on_paused("B-0")
    demo_connectors.on_resumed("B-0")
    assert demo_connectors.paused() == frozenset()
    assert demo_connectors.progress("B-0") == 0


def test_an_unknown_type_or_a_second_start_is_refused():
    demo_connectors, _ = connectors()
    with pytest.raises(ValueError, match="unknown demo connector type"):
        demo_connectors.on_assigned("A-0", {"type": "teleport"}, 1)
    demo_connectors.on_assigned("A-0", {}, 1)
    with pytest.raises(RuntimeError, match="already running"):
        demo_connectors.on_assigned("A-0", {}, 2)
