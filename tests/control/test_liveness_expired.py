"""``liveness.expired``: which Lease copies to read again before their members depart."""

from __future__ import annotations

from kooper.control import liveness, views


def lease(name: str, renew_ms: int | None = 1_000, duration_s: int | None = 10) -> views.LeaseView:
    return views.LeaseView(namespace="ns", name=name, member=name, pod_uid="u",
                           incarnation="i", renew_ms=renew_ms, duration_s=duration_s,
                           report=None, error="", report_text="")


def test_a_copy_expires_its_duration_and_skew_after_this_operator_first_saw_it():
    copy = lease("a")
    observed = liveness.observe({}, [copy], now_ms=5_000)
    assert liveness.expired([copy], observed, now_ms=16_999, default_duration_s=30,
                            skew_s=2) == []
    assert liveness.expired([copy], observed, now_ms=17_000, default_duration_s=30,
                            skew_s=2) == ["a"]


def test_a_copy_never_observed_or_changed_since_vouches_from_now():
    old, renewed = lease("a"), lease("a", renew_ms=2_000)
    observed = liveness.observe({}, [old], now_ms=0)
    assert liveness.expired([renewed], observed, now_ms=60_000, default_duration_s=30,
                            skew_s=0) == []
    assert liveness.expired([lease("b")], observed, now_ms=60_000, default_duration_s=30,
                            skew_s=0) == []


def test_a_lease_never_renewed_is_not_read_again():
    copy = lease("a", renew_ms=None)
    observed = liveness.observe({}, [copy], now_ms=0)
    assert liveness.expired([copy], observed, now_ms=60_000, default_duration_s=30,
                            skew_s=0) == []


def test_the_groups_duration_applies_when_the_lease_names_none():
    copy = lease("a", duration_s=None)
    observed = liveness.observe({}, [copy], now_ms=0)
    assert liveness.expired([copy], observed, now_ms=29_999, default_duration_s=30,
                            skew_s=0) == []
    assert liveness.expired([copy], observed, now_ms=30_000, default_duration_s=30,
                            skew_s=0) == ["a"]
