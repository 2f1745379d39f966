"""Hard chaos seeds that once broke an invariant, each named with its cause (issue 12).

Each runs in virtual time in a few milliseconds, and each failed before its fix. They
replay the first version of the families (``families=1``), the one they failed in.
"""

from __future__ import annotations

import pytest

from kooper.sim import chaos

# Two operator deaths before a status write: the first round after a restart deleted or
# rewrote the only ConfigMap holding an epoch, the operator died again, and the next
# leader issued that per-resource epoch a second time (two members started one task at
# one epoch). Fixed: such a round persists the epochs first (control.epochs.unpersisted).
EPOCH_ISSUED_TWICE = (1468, 6239, 9765, 13194, 13247, 16800, 17985, 20314, 24254, 30189,
                      31618, 36971)
# The same cause, seen as a task never started again: its member's session refused the
# reissued epoch, and the group stayed assigned but not running.
NOT_RUNNING = (27438,)
# Eager: a stop-the-world round died part-way through its ConfigMap writes; the restored
# documents looked like a finished, unbalanced assignment and nothing rebalanced.
# Fixed: a ConfigMap newer than the status under eager restores ``eagerRevoking``.
EAGER_CUT_SHORT = (7716, 18789, 21793, 38245, 39436)


# A member cut off right after joining fenced itself with no epoch to retire; its
# delayed join report had made the operator issue it an epoch and write it documents;
# healed a few ms after it was declared departed, it applied one of them and started
# work already given to others. Fixed: fences are counted (Report.rejoins) and a
# document names the count its epoch was issued for (Assignment.rejoins).
FENCED_BEFORE_ANY_DOCUMENT = (47195,)


@pytest.mark.parametrize("seed", [*EPOCH_ISSUED_TWICE, *NOT_RUNNING, *EAGER_CUT_SHORT,
                                  *FENCED_BEFORE_ANY_DOCUMENT])
def test_a_hard_chaos_seed_that_once_failed_keeps_every_invariant(seed: int):
    assert chaos.run_hard(seed, families=1).violations == ()


# The second families (forged reports, clock offsets, departures by the step's liveness):
# a forged claim adopted by a KIP-415 leader that forgot the assignments, at the task's
# old epoch (2474, 3044, 5647, 8219, 8541); a forged claim on work nobody held, in a
# report acknowledging the claimant's latest document, waited for forever (4011, 7623,
# 8344, and under eager, where it held the stop-the-world round open: 2147, 5537, 7289);
# a forged claim on work being revoked, listed as revoked in the claimant's document and
# adopted by a KIP-415 leader after three operator deaths at the epoch the task's last
# owner ran it (58615, found by 100,000 runs; control.epochs.unissued); the same
# with a forged claim in the join report of a member that had no ConfigMap (662, 4058).
FORGED = (2474, 3044, 5647, 8219, 8541, 4011, 7623, 8344, 2147, 5537, 7289, 58615, 662,
          4058)


@pytest.mark.parametrize("seed", FORGED)
def test_a_forged_claim_neither_reuses_an_epoch_nor_stalls_the_group(seed: int):
    assert chaos.run_hard(seed, families=2).violations == ()


# Found by the "every delay honoured" check (chaos.check_delays). 4405: a member that
# departed while still told to stop work had that work counted lost (it opened KIP-415's
# delay) but audited nowhere (control.audit). 11356: the round that gave lost work back
# to its returning member died before its audit rows; the member's own start is the
# evidence (the check). 16071: under kip415, work a returning member still reported (from
# before it was cut off) was revoked from it and, once let go, handed out before the
# delay ran out; it stays lost (assignor.lost.returned_holding). 21193: an eager round (which
# ends every wait) died mid-write; its documents were acted on, and its rows are now kept,
# marked cut, promising nothing (runner.Sim.record_audit).
# 43378: a return decided only by a round the operator died in ended the wait, and the
# restored operator's continued departure was judged as a new one (cut rows end no wait).
# 19298: lost work its returned member still held was granted at the deadline.
# 9684, 27559, 34804: a returning member's round died after writing documents that
# workers acted on; its rows count when some worker started something at its generation.
# 7800, 12477, 26329: a restarted operator announcing a departure again, or learning it
# was planned, or a departed member counted live again (it starts something).
# 46398, 71742: a restarted operator judged a departure planned in a round it died in,
# after workers acted on it. 2268: a cut kip415 round's lost rows promise nothing.
DELAYS = (4405, 11356, 16071, 21193, 43378, 19298, 9684, 27559, 34804, 7800, 12477, 26329,
          46398, 71742, 2268)


# A double ownership: under kip415 the deadline came while a returned member was still
# stopping its old lost work, and a candidate was granted it (assignor grants skip what
# another member still holds).
GRANTED_WHILE_HELD = (28203, 38952)


@pytest.mark.parametrize("seed", GRANTED_WHILE_HELD)
def test_lost_work_is_never_granted_while_its_returned_member_still_runs_it(seed: int):
    assert chaos.run_hard(seed, families=2).violations == ()


@pytest.mark.parametrize("seed", DELAYS)
def test_a_delay_the_rows_promise_is_honoured(seed: int):
    assert chaos.run_hard(seed, families=2).violations == ()


# Families 3 (force deletes, issue 22): a force-deleted member was being revoked a task
# when a kip415 operator restarted and forgot the assignments; its documents alone
# (without what they revoke) let the task start elsewhere while the old process still
# ran it. Fixed: the first round after a restore keeps what the documents assign or revoke.
VANISHED_WHILE_REVOKING = (4129, 5055)


@pytest.mark.parametrize("seed", VANISHED_WHILE_REVOKING)
def test_a_force_deleted_member_keeps_what_it_was_being_revoked(seed: int):
    assert chaos.run_hard(seed, families=3).violations == ()


# Families 3, kip415 unpaced: a member that fenced itself had accepted generation 11
# before its fence; the operator gave it a new membership epoch with its work
# unchanged, so its document kept generation 11, which the worker (rightly) ignores as
# not newer. An eager round then waited forever for it to confirm its revocations:
# nothing ran. Fixed: a member starting a new membership gets a newer generation
# (``control.reissue``), whether or not its work changed.
NEW_MEMBERSHIP_SAME_GENERATION = (3593,)


@pytest.mark.parametrize("seed", NEW_MEMBERSHIP_SAME_GENERATION)
def test_a_new_membership_always_comes_with_a_generation_the_member_has_not_seen(seed: int):
    assert chaos.run_hard(seed, families=3).violations == ()


# Families 3, kooper: once acknowledged revocations stopped being rewritten (a document
# keeps listing work its member stopped), a restarted leader read sim-2's old document
# (generation 3, revoking c01-3, long since run by sim-4) as a revocation in flight; sim-2
# fenced, sim-4 came back, and c01-3 was lost twice: given back to sim-4 and to sim-0 in
# one round. Fixed: the status lists the members whose revocations are unacknowledged
# (``status.state.revoking``) and a restore reads no other document's revoked set.
ACKNOWLEDGED_REVOCATION_RESTORED = (8269,)


@pytest.mark.parametrize("seed", ACKNOWLEDGED_REVOCATION_RESTORED)
def test_a_restored_leader_reads_no_acknowledged_revocation_as_in_flight(seed: int):
    assert chaos.run_hard(seed, families=3).violations == ()
