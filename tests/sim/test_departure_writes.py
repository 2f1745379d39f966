"""A big group's departures: the departed member's tasks go to the members short of
work, and nobody else moves (``balance.paths``: the spread target from the holdings).

60 members x 60 connectors of 100 tasks is past the exact search's budget
(``balance.target._FLOW_BUDGET``), so each departure's target comes from ``from_holdings``.
Before it, the greedy matrix with exchanges moved 1.5-2.5 documents' worth per member
whose work changed (``benchmarks/bench_join_writes.py --members 60 --tasks 6000``).
"""

from __future__ import annotations

from kooper.core.balance import target
from kooper.protocol import messages
from kooper.sim import runner
from kooper.sim import scenarios as S

WINDOW_MS = 30_000


def test_scale_downs_of_a_big_group_move_little_more_than_the_departed_work(monkeypatch):
    pods, connectors, departures = 60, 60, 8
    for k in range(pods - departures, pods):  # rows x members x remainders, every round
        assert connectors * k * connectors * (100 % k) > target._FLOW_BUDGET
    written: list[tuple[int, messages.Assignment | None, messages.Assignment]] = []
    write = runner.Sim.write_document

    def logged(self: runner.Sim, message: messages.Assignment) -> None:
        written.append((self.clock.now_ms, self.written.get(message.member), message))
        write(self, message)

    monkeypatch.setattr(runner.Sim, "write_document", logged)
    steps = tuple(S.Step(S.Action.SCALE_DOWN, count=1, delay_ms=WINDOW_MS)
                  for _ in range(departures))
    config = runner.Config(pods=pods, connectors=connectors, tasks=100, seed=1, delay_ms=0,
                           warmup_ms=WINDOW_MS)
    result = runner.simulate(config, S.Scenario("scale-downs", steps))
    assert not result.violations
    for index in range(len(steps)):
        lo = WINDOW_MS * (index + 1)
        window = [(was, now) for at, was, now in written if lo <= at < lo + WINDOW_MS]
        first: dict[str, frozenset[str]] = {}
        last: dict[str, frozenset[str]] = {}
        for was, now in window:
            first.setdefault(now.member, was.assigned.tasks if was else frozenset())
            last[now.member] = now.assigned.tasks
        changed = sum(1 for member, tasks in last.items() if tasks != first[member])
        assert len(window) <= 1.2 * changed, (index, len(window), changed)
