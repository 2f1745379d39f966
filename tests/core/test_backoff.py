"""The consecutive-revocation backoff as a table (Kafka's KAFKA-12495 numbers)."""

from __future__ import annotations

import pytest

from kooper.core import backoff, model

B = model.RevocationBackoff


@pytest.mark.parametrize(
    ("streak", "max_delay_ms", "interval"),
    [
        (0, 300_000, 0),
        (1, 300_000, 40),
        (2, 300_000, 1_600),
        (3, 300_000, 64_000),
        (4, 300_000, 300_000),  # 2,560,000 capped at the max delay
        (50, 300_000, 300_000),
        (1, 1, 1),  # max delay equal to the initial interval
        (3, 0, 0),  # delay disabled: revoke at once
    ],
)
def test_interval_grows_by_40_from_1_ms_up_to_the_max_delay(streak, max_delay_ms, interval):
    assert backoff.interval_ms(streak, max_delay_ms) == interval


@pytest.mark.parametrize(
    ("before", "wants", "now", "allowed", "after"),
    [
        # A first revoking round revokes and remembers it.
        (B(), True, 0, True, B(True, 0, None)),
        # Right after a revoking round: back off 40 ms, the streak counts one.
        (B(True, 0, None), True, 10, False, B(False, 1, 50)),
        # Within the window: still no revocation.
        (B(False, 1, 50), True, 30, False, B(False, 1, 50)),
        # At the window's end: revoke at once.
        (B(False, 1, 50), True, 50, True, B(True, 1, None)),
        # The next consecutive one waits 1,600 ms.
        (B(True, 1, None), True, 60, False, B(False, 2, 1_660)),
        # Nothing to revoke: the state stays (settled() resets it on a changing round).
        (B(True, 2, None), False, 70, True, B(True, 2, None)),
        (B(False, 2, 1_660), False, 70, True, B(False, 2, 1_660)),
    ],
)
def test_decide(before, wants, now, allowed, after):
    assert backoff.decide(before, wants_revocation=wants, now_ms=now, max_delay_ms=300_000) == (
        allowed, after)


def test_with_the_delay_disabled_consecutive_rounds_revoke_at_once():
    allowed, after = backoff.decide(B(True, 0, None), wants_revocation=True, now_ms=5,
                                    max_delay_ms=0)
    assert allowed
    assert after == B(True, 1, None)


def test_a_changing_round_without_revocation_right_after_a_revoking_one_resets_the_count():
    assert backoff.settled(B(True, 3, None)) == B()
    assert backoff.settled(B(False, 3, None)) == B(False, 3, None)
    assert backoff.remaining_ms(B(False, 1, 50), 20) == 30
    assert backoff.remaining_ms(B(), 20) == 0
