"""A Lease vouches only for the member its name says (issue 12, mechanism 3)."""

from __future__ import annotations

import dataclasses

from kooper.control import modelled, views
from kooper.control import step as control
from kooper.core import ids, model

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=0)


def member(name: str) -> model.Member:
    return model.Member(W(name), model.EMPTY, -1, frozenset(model.Protocol), "1")


def inputs(leases: list[views.LeaseView], members: list[model.Member]) -> control.Inputs:
    return control.Inputs(group=modelled.group(GROUP, SETTINGS),
                          pods=[modelled.pod(GROUP, m) for m in members], leases=leases,
                          connectors=modelled.connectors(GROUP, {"A": 2}))


def test_a_lease_held_by_another_pod_vouches_for_nobody_and_is_counted():
    a, b = member("a"), member("b")
    honest = modelled.lease(a)
    forged = dataclasses.replace(modelled.lease(b), holder="a/1")  # a renews b's Lease
    decided = control.step(inputs([honest, forged], [a, b]), control.Memory(), now_ms=0)
    assert decided.plan is not None
    assert set(decided.plan.members) == {W("a")}
    assert "LeaseIdentityMismatch" in [e.reason for e in decided.events]
    assert decided.metrics.ignored_leases == 1
    assert "LeaseIdentityMismatch" in decided.metrics.bad_input


def test_the_holder_the_sdk_writes_is_accepted():
    a = member("a")
    lease = dataclasses.replace(modelled.lease(a), holder="a/1")
    decided = control.step(inputs([lease], [a]), control.Memory(), now_ms=0)
    assert decided.plan is not None
    assert set(decided.plan.members) == {W("a")}
    assert decided.metrics.ignored_leases == 0


def test_a_parsed_lease_keeps_its_holder():
    body = {"metadata": {"name": "kooper-a", "namespace": "ns",
                         "labels": {views.MEMBER_LABEL: "a"}},
            "spec": {"holderIdentity": "b/7", "renewTime": "2026-11-25T00:00:00.000000Z"}}
    assert views.parse_lease(body).holder == "b/7"
