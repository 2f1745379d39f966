"""ConfigMap writes whose answer is lost after the API server committed them (a 504
after the commit, a connection reset before the answer): the operator counts the write
as failed and retries; what landed is its own, not "changed by someone else"."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from tests.shell.conftest import NS, make_group

from kooper.control import views
from kooper.core import ids, model
from kooper.emulator import cluster
from kooper.protocol import messages
from kooper.sdk import apierrors
from kooper.sdk.connection import Connection
from kooper.shell import kube, writes

GROUP = "wg"


def doc(generation: int, *tasks: str) -> messages.Assignment:
    return messages.Assignment(
        group=GROUP, member="a", generation=generation, protocol=model.Protocol.COMPATIBLE,
        assigned=model.ConnectorsAndTasks(frozenset(), frozenset(tasks)))


class LosingClient(kube.Client):
    """Commits every ConfigMap write; the answers of the next ``lose`` are lost."""

    lose = 0

    async def write_configmap(self, body: Mapping[str, Any], *,
                              resource_version: str | None) -> str:
        written = await super().write_configmap(body, resource_version=resource_version)
        if self.lose:
            self.lose -= 1
            raise apierrors.Unreachable("PUT configmaps: connection reset by peer", status=0)
        return written


class Setup:
    def __init__(self, emulated: cluster.EmulatedCluster) -> None:
        self.emulated = emulated
        self.loop = asyncio.new_event_loop()
        self.client = LosingClient(Connection(server=emulated.url, insecure=True))
        self.writer = writes.Writer(self.client, NS, GROUP)
        self.uid = str(emulated.get("workergroups", GROUP, namespace=NS)["metadata"]["uid"])

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def write(self, message: messages.Assignment) -> frozenset[ids.WorkerId]:
        return frozenset(self.run(self.writer.configmaps([message], group_uid=self.uid)))

    def edits(self) -> dict[ids.WorkerId, str]:
        found = self.emulated.list("configmaps", namespace=NS)
        items = found["items"] if isinstance(found, dict) else found
        configmaps = {view.member: view for view in map(views.parse_configmap, items)}
        return dict(self.run(self.writer.edits([ids.WorkerId("a")], configmaps)))


@pytest.fixture
def setup(emulated: cluster.EmulatedCluster) -> Iterator[Setup]:
    make_group(emulated, GROUP)
    s = Setup(emulated)
    try:
        yield s
    finally:
        s.run(s.client.close())
        s.loop.close()


def test_a_write_whose_answer_was_lost_is_not_taken_for_someone_else_s_edit(setup: Setup):
    assert setup.write(doc(1, "c-0")) == frozenset()
    setup.client.lose = 1
    assert setup.write(doc(2, "c-1")) == {"a"}  # failed, as far as the operator knows
    # The API holds generation 2 all the same: the operator's own text, to be written
    # again (the state still says generation 1's), but nobody else's doing. Taken for an
    # edit, it posted a Warning Event "ConfigMap kooper-a was changed by someone else" and
    # counted kooper_bad_input_total{reason="ConfigMapEdited"}.
    assert setup.edits() == {"a": "unanswered"}
    assert setup.writer.newest_found == 2  # what its rewrite must be newer than
    assert setup.write(doc(3, "c-1")) == frozenset()  # the rewrite: no 409, no conflict
    assert setup.client.stats.conflicts == 0
    assert setup.edits() == {}


def test_an_edit_after_a_lost_answer_is_still_an_edit(setup: Setup):
    assert setup.write(doc(1, "c-0")) == frozenset()
    setup.client.lose = 1
    assert setup.write(doc(2, "c-1")) == {"a"}
    body = setup.emulated.get("configmaps", "kooper-a", namespace=NS)
    body["data"] = {messages.CONFIGMAP_KEY: "{}"}
    setup.emulated.replace("configmaps", "kooper-a", body, namespace=NS)
    assert setup.edits() == {"a": "edited"}
    assert setup.writer.newest_found == 0  # "{}" is no document a worker could accept
