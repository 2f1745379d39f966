"""A stalled leader's late writes lose, by construction: every write kind it could still
make after a new term fenced the group fails (issue 22).

Two writers share the API: the old term (epoch 1) wrote the group's ConfigMaps and
status, then stalled; the new term (epoch 2) ``fence``s the group, re-issuing every
ConfigMap and claiming the status under its epoch. The old term then wakes up with its
remembered resourceVersions and tries each kind of write it makes: a replace, a
create, a delete, a status patch. Each fails with ``LostLeadership`` and changes
nothing. Each test also runs with its fence switched off, where the stale write lands:
the tests can fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from tests.shell.conftest import NS, make_group

from kooper.control import views
from kooper.core import model
from kooper.emulator import cluster
from kooper.protocol import codec, messages
from kooper.sdk.connection import Connection
from kooper.shell import kube, writes

GROUP = "wg"


def doc(member: str, generation: int, *tasks: str, leader_epoch: int) -> messages.Assignment:
    return messages.Assignment(
        group=GROUP, member=member, generation=generation, protocol=model.Protocol.COMPATIBLE,
        assigned=model.ConnectorsAndTasks(frozenset(), frozenset(tasks)),
        leader_epoch=leader_epoch)


class Terms:
    """The old and the new leader's writers over one emulated API."""

    def __init__(self, emulated: cluster.EmulatedCluster, loop: asyncio.AbstractEventLoop
                 ) -> None:
        self.emulated = emulated
        self.loop = loop
        self.client = kube.Client(Connection(server=emulated.url, insecure=True))
        self.old = writes.Writer(self.client, NS, GROUP, epoch=1)
        self.new = writes.Writer(self.client, NS, GROUP, epoch=2)
        self.uid = str(emulated.get("workergroups", GROUP, namespace=NS)["metadata"]["uid"])

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def group(self) -> views.GroupView:
        return views.parse_group(self.emulated.get("workergroups", GROUP, namespace=NS))

    def configmaps(self) -> dict[str, views.ConfigMapView]:
        found = self.emulated.list("configmaps", namespace=NS)
        items = found["items"] if isinstance(found, dict) else found
        return {view.member: view for view in map(views.parse_configmap, items)
                if view.group == GROUP}

    def document(self, member: str) -> messages.Assignment:
        return codec.decode_assignment(self.configmaps()[member].text)

    def fence(self, members: tuple[str, ...] = ()) -> None:
        """The new term fences until the views show its epoch everywhere (``members``:
        the group's members by their Leases)."""
        for _ in range(5):
            if self.run(self.new.fence(self.group(), self.configmaps(), members)):
                return
        raise AssertionError("the fence never settled")


@pytest.fixture
def terms(emulated: cluster.EmulatedCluster) -> Iterator[Terms]:
    make_group(emulated, GROUP)
    loop = asyncio.new_event_loop()
    t = Terms(emulated, loop)
    # The old term's round: two members' documents and the status.
    t.run(t.old.configmaps([doc("a", 1, "c-0", leader_epoch=1),
                            doc("b", 1, "c-1", leader_epoch=1)], group_uid=t.uid))
    t.run(t.old.patch_status(t.group(), lambda base: {**base, "leaderEpoch": 1,
                                                      "rebalanceGeneration": 1}))
    old_group = t.group()
    t.fence()
    t.old_group = old_group  # type: ignore[attr-defined]
    try:
        yield t
    finally:
        t.run(t.client.close())
        loop.close()


@pytest.fixture(params=["fenced", "without the epoch check"])
def fenced(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param != "fenced":
        monkeypatch.setattr(writes.Writer, "outranked", lambda self, what, epoch: None)
    return request.param == "fenced"


def test_the_fence_reissues_every_document_and_claims_the_status(terms: Terms):
    assert {m: cm.leader_epoch for m, cm in terms.configmaps().items()} == {"a": 2, "b": 2}
    assert terms.document("a").leader_epoch == 2
    assert terms.document("a").assigned.tasks == {"c-0"}  # re-issued, nothing moved
    assert terms.group().status["leaderEpoch"] == 2


def test_a_stale_replace_fails(terms: Terms, fenced: bool):
    stale = terms.old.configmaps([doc("a", 2, "c-1", leader_epoch=1)], group_uid=terms.uid)
    if fenced:
        with pytest.raises(writes.LostLeadership):
            terms.run(stale)
        assert terms.document("a").assigned.tasks == {"c-0"}
    else:
        terms.run(stale)
        assert terms.document("a").assigned.tasks == {"c-1"}


def test_a_stale_replace_fails_without_the_epoch_check_once_the_fence_reissued(
        emulated: cluster.EmulatedCluster):
    """The re-issue alone breaks the old term's preconditions; without it the replace lands."""
    make_group(emulated, GROUP)
    loop = asyncio.new_event_loop()
    t = Terms(emulated, loop)
    try:
        t.run(t.old.configmaps([doc("a", 1, "c-0", leader_epoch=1)], group_uid=t.uid))
        t.run(t.old.configmaps([doc("a", 2, "c-1", leader_epoch=1)], group_uid=t.uid))
        assert t.document("a").assigned.tasks == {"c-1"}  # no new term fenced: it lands
    finally:
        t.run(t.client.close())
        loop.close()


def test_a_stale_create_fails(terms: Terms, fenced: bool):
    terms.run(terms.new.configmaps([doc("c", 2, "c-2", leader_epoch=2)], group_uid=terms.uid))
    stale = terms.old.configmaps([doc("c", 2, "c-0", leader_epoch=1)], group_uid=terms.uid)
    if fenced:
        with pytest.raises(writes.LostLeadership):
            terms.run(stale)
        assert terms.document("c").assigned.tasks == {"c-2"}
    else:
        terms.run(stale)
        assert terms.document("c").assigned.tasks == {"c-0"}


def test_a_stale_delete_fails(terms: Terms, fenced: bool):
    stale = terms.old.delete(["b"])
    if fenced:
        with pytest.raises(writes.LostLeadership):
            terms.run(stale)
        assert "b" in terms.configmaps()
    else:
        terms.run(stale)
        assert "b" not in terms.configmaps()


def test_a_stale_status_patch_fails(terms: Terms, fenced: bool):
    old_group: views.GroupView = terms.old_group  # type: ignore[attr-defined]
    stale = terms.old.patch_status(old_group, lambda base: {**base, "rebalanceGeneration": 7})
    if fenced:
        with pytest.raises(writes.LostLeadership):
            terms.run(stale)
        assert terms.group().status["rebalanceGeneration"] == 1
    else:
        terms.run(stale)
        assert terms.group().status["rebalanceGeneration"] == 7


def test_a_worker_never_applies_a_lower_leader_epoch_than_it_has_seen():
    from kooper.sdk.session import Session

    session = Session(member_name="a", incarnation="a/1",
                      protocols=frozenset({model.Protocol.COMPATIBLE}), lease_duration_ms=30_000)
    session.join(now_ms=0)
    assert session.receive_assignment(doc("a", 3, "c-0", leader_epoch=2))
    assert not session.receive_assignment(doc("a", 4, "c-1", leader_epoch=1))
    assert session.receive_assignment(doc("a", 5, "c-1", leader_epoch=2))
    # An operator without leader election (epoch 0) is alone: its documents are applied.
    assert session.receive_assignment(doc("a", 6, "c-0", leader_epoch=0))
    assert not session.receive_assignment(doc("a", 7, "c-1", leader_epoch=1))


@pytest.mark.parametrize("occupied", [True, False], ids=["occupied", "without occupying"])
def test_a_stale_create_of_a_new_member_s_first_document_fails(
        emulated: cluster.EmulatedCluster, occupied: bool):
    """Member ``c`` joined (its Lease is there) but has no ConfigMap yet when the old term
    stalls in the round that creates its first document. The new term's fence occupies
    the name with an empty ConfigMap under its epoch, so the late create answers 409
    and the old term stands down; without that, the create lands after the fence, and a
    member that has not seen the new epoch would take it (the simulator's seed 5357)."""
    make_group(emulated, GROUP)
    loop = asyncio.new_event_loop()
    t = Terms(emulated, loop)
    try:
        t.run(t.old.configmaps([doc("a", 1, "c-0", leader_epoch=1)], group_uid=t.uid))
        t.fence(members=("a", "c") if occupied else ("a",))
        stale = t.old.configmaps([doc("c", 2, "c-1", leader_epoch=1)], group_uid=t.uid)
        if occupied:
            assert t.configmaps()["c"].text == ""  # no document: a worker reads nothing
            assert t.configmaps()["c"].leader_epoch == 2
            with pytest.raises(writes.LostLeadership):
                t.run(stale)
            assert t.configmaps()["c"].text == ""
        else:
            t.run(stale)
            assert t.document("c").assigned.tasks == {"c-1"}
        # The new term writes c's first document over whatever holds the name.
        t.run(t.new.configmaps([doc("c", 3, "c-2", leader_epoch=2)], group_uid=t.uid))
        assert t.document("c").assigned.tasks == {"c-2"}
    finally:
        t.run(t.client.close())
        loop.close()
