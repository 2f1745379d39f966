"""A stalled leader's late Connector status patches lose too (issue 22).

Two terms patch one Connector's status through ``shell.connectors.ConnectorStatuses``:
the old term (epoch 1) places the connector's task on ``a``, stalls; the new term
(epoch 2) places it on ``b`` and stamps its epoch; the old term wakes up and patches its
stale placement again. Fenced, that patch fails (a 409, then a newer epoch on the
re-read: the old term stands down) and the status keeps the new term's placement;
without the fence (no epochs: ``epoch=0``) the stale placement lands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from tests.shell.conftest import NS, make_connector, make_group

from kooper.control import outputs, views
from kooper.core import ids, model
from kooper.emulator import cluster
from kooper.sdk.connection import Connection
from kooper.shell import connectors, kube

GROUP = "wg"
NAME = "C"


def work(emulated: cluster.EmulatedCluster, holder: str) -> outputs.Connectors:
    """A round's Connector work placing ``C``'s one task on ``holder``."""
    view = views.parse_connector(emulated.get("connectors", NAME, namespace=NS))
    mine = model.ConnectorsAndTasks(frozenset({NAME}), frozenset({f"{NAME}-0"}))
    plan = model.Plan(
        members={ids.WorkerId(holder): model.MemberPlan(mine, model.EMPTY, 1)},
        state=model.PlanState(generation=1), protocol=model.Protocol.COMPATIBLE,
        delay_ms=0, next_round_at_ms=None, changed=frozenset(), newly_assigned={},
        newly_lost=model.EMPTY, unassigned=model.EMPTY)
    return outputs.Connectors(
        plan=plan, snapshot=model.Snapshot(connectors={NAME: 1}, members={}),
        connectors=[view], restarts={}, failures={}, task_restarts={}, rejected={},
        dirty=frozenset({NAME}), settled=True)


class Terms:
    def __init__(self, emulated: cluster.EmulatedCluster, *, fenced: bool) -> None:
        self.emulated = emulated
        self.loop = asyncio.new_event_loop()
        self.client = kube.Client(Connection(server=emulated.url, insecure=True))
        self.lost: list[str] = []
        self.old = self._statuses(1 if fenced else 0)
        self.new = self._statuses(2 if fenced else 0)

    def _statuses(self, epoch: int) -> connectors.ConnectorStatuses:
        return connectors.ConnectorStatuses(self.client, NS, delay_s=0, max_wait_s=0,
                                            retry_s=0, epoch=epoch, on_lost=self.lost.append)

    def patch(self, statuses: connectors.ConnectorStatuses, holder: str) -> bool:
        return bool(self.loop.run_until_complete(
            statuses._patch(work(self.emulated, holder), now_ms=1_000)))

    def status(self) -> dict[str, Any]:
        return dict(self.emulated.get("connectors", NAME, namespace=NS).get("status") or {})


@pytest.fixture(params=["fenced", "without epochs"])
def terms(request: pytest.FixtureRequest, emulated: cluster.EmulatedCluster) -> Iterator[Terms]:
    make_group(emulated, GROUP)
    make_connector(emulated, NAME, 1, group=GROUP)
    t = Terms(emulated, fenced=request.param == "fenced")
    try:
        yield t
    finally:
        t.loop.run_until_complete(t.client.close())
        t.loop.close()


def test_a_stale_connector_status_patch_fails_once_a_newer_term_patched(terms: Terms):
    fenced = terms.old.epoch > 0
    assert terms.patch(terms.old, "a")
    assert terms.status()["worker"] == "a"
    assert terms.patch(terms.new, "b")  # the takeover: the new term's placement
    assert terms.status()["worker"] == "b"
    assert terms.status().get("leaderEpoch") == (2 if fenced else None)
    terms.old.patched.clear()  # the stalled term recomputes its whole stale status
    landed = terms.patch(terms.old, "a")
    if fenced:
        assert not landed
        assert terms.old.lost  # it stood down, once
        assert len(terms.lost) == 1
        assert "epoch 2" in terms.lost[0]
        assert terms.status()["worker"] == "b"
        assert terms.status()["leaderEpoch"] == 2
    else:
        assert landed
        assert terms.status()["worker"] == "a"


def test_a_new_term_overwrites_a_stale_patch_that_landed_before_its_own(terms: Terms):
    assert terms.patch(terms.new, "b")
    assert terms.status()["worker"] == "b"
    if terms.new.epoch:
        # An older term's late patch, sent with a version the new term has not yet
        # replaced, lands; the new term's next patch (a 409 on its own version, re-read:
        # an older epoch) puts its placement back.
        body = terms.emulated.get("connectors", NAME, namespace=NS)
        body["status"] = {**body["status"], "worker": "a", "leaderEpoch": 1}
        terms.emulated.replace("connectors", NAME, body, namespace=NS, subresource="status")
        assert terms.status()["worker"] == "a"
        terms.new.patched.clear()
        assert terms.patch(terms.new, "b")
        assert terms.status()["worker"] == "b"
        assert terms.status()["leaderEpoch"] == 2
        assert not terms.lost


def test_a_connector_deleted_and_created_again_under_its_name_gets_its_status(terms: Terms):
    """``kubectl delete`` and ``apply`` of a Connector between two status patches (or
    ``kubectl replace --force``): the new object (a new uid) starts with no status. The
    statuses remembered what they patched on the old one by name, found the new status
    the same as that, and patched nothing: the Connector said nothing until its placement
    changed."""
    assert terms.patch(terms.new, "b")
    before = terms.status()
    assert before["worker"] == "b"
    terms.emulated.delete("connectors", NAME, namespace=NS)
    make_connector(terms.emulated, NAME, 1, group=GROUP)
    assert terms.status() == {}
    assert terms.patch(terms.new, "b")
    after = terms.status()
    assert after["worker"] == "b"
    assert after.get("leaderEpoch") == before.get("leaderEpoch")


def test_connector_status_retries_back_off_while_the_api_keeps_failing(
        emulated: cluster.EmulatedCluster, monkeypatch: pytest.MonkeyPatch):
    """An API server that answers every status patch with 503 (an outage) is patched again
    after ``retry_s``, doubled per failure in a row up to ``max_retry_s``, not every
    ``retry_s``: a thousand Connectors would be a thousand patches a second. Once a patch
    lands the next failure starts from ``retry_s`` again."""
    make_group(emulated, GROUP)
    make_connector(emulated, NAME, 1, group=GROUP)
    loop = asyncio.new_event_loop()
    client = kube.Client(Connection(server=emulated.url, insecure=True))
    statuses = connectors.ConnectorStatuses(client, NS, delay_s=0, max_wait_s=0,
                                            retry_s=0.01, max_retry_s=0.04)
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        if seconds:
            waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(connectors.asyncio, "sleep", sleep)
    emulated.fail_next_writes("connectors", 5, code=503)

    async def drive() -> None:
        statuses.queue(work(emulated, "a"), now_ms=1_000)
        assert statuses.task is not None
        await statuses.task  # it returns once a patch landed and nothing is queued

    try:
        loop.run_until_complete(drive())
        assert waits == [0.01, 0.02, 0.04, 0.04, 0.04]
        assert statuses.failures == 0
        assert dict(emulated.get("connectors", NAME, namespace=NS)["status"])["worker"] == "a"
    finally:
        loop.run_until_complete(client.close())
        loop.close()
