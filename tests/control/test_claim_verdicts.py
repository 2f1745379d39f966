"""A claim on work no document gave the claimant, judged by one ordered table
(``control.claims.VERDICTS``): every row decides some claim, in its order."""

from __future__ import annotations

import itertools

import pytest

from kooper.control import claims

F = claims.Facts


@pytest.mark.parametrize(("facts", "foreign"), [
    # A new KIP-415 leader trusts the ConfigMaps over a report...
    (F(forgotten=True, documented=True, acknowledges=False, elsewhere=False), True),
    # ...and, with none read (kooper replay), adopts what members report, whoever held it.
    (F(forgotten=True, documented=False, acknowledges=True, elsewhere=True), False),
    # A report acknowledging a document that does not assign the resource is false,
    # even when nobody else holds it.
    (F(forgotten=False, documented=True, acknowledges=True, elsewhere=False), True),
    # Another member's work, or a departed member's lost work, is never taken by a report.
    (F(forgotten=False, documented=True, acknowledges=False, elsewhere=True), True),
    # Work nobody else holds: the reporter holds it.
    (F(forgotten=False, documented=True, acknowledges=False, elsewhere=False), False),
])
def test_each_row_of_the_table_decides_a_claim(facts: claims.Facts, foreign: bool):
    assert claims.verdict(facts) is foreign


def test_every_row_is_the_first_to_match_some_claim():
    first = set()
    for values in itertools.product((False, True), repeat=4):
        facts = F(*values)
        first.add(next(why for why, when, _ in claims.VERDICTS if when(facts)))
    assert first == {why for why, _, _ in claims.VERDICTS}


def test_the_last_row_matches_every_claim():
    _, when, foreign = claims.VERDICTS[-1]
    assert all(when(F(*values)) for values in itertools.product((False, True), repeat=4))
    assert foreign is False
