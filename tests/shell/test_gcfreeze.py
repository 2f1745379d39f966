"""The operator freezes its startup heap once, after every group planned and went quiet."""

from __future__ import annotations

import asyncio
import dataclasses

from kooper.shell import gcfreeze


@dataclasses.dataclass
class Runner:
    rounds_planned: int = 0


def test_freezes_once_every_group_planned_and_no_round_followed_for_the_quiet_spell():
    runners = [Runner(1), Runner(0)]
    frozen: list[int] = []

    def freeze() -> int:
        frozen.append(sum(r.rounds_planned for r in runners))
        return 7

    async def scenario() -> int:
        task = asyncio.create_task(gcfreeze.freeze_when_settled(
            lambda: runners, quiet_s=0.05, poll_s=0.01, max_wait_s=30, freeze=freeze))
        for _ in range(20):  # A group that never planned holds the freeze back.
            await asyncio.sleep(0.01)
        assert not frozen
        runners[1].rounds_planned = 1
        return await asyncio.wait_for(task, 10)

    assert asyncio.run(scenario()) == 7
    assert frozen == [2]


def test_a_group_that_keeps_planning_is_frozen_after_the_longest_wait():
    runner = Runner(1)

    async def busy() -> None:
        while True:
            runner.rounds_planned += 1
            await asyncio.sleep(0.005)

    async def scenario() -> int:
        noise = asyncio.create_task(busy())
        try:
            return await gcfreeze.freeze_when_settled(
                lambda: [runner], quiet_s=60, poll_s=0.01, max_wait_s=0.1, freeze=lambda: 3)
        finally:
            noise.cancel()

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == 3
