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


@pytest.mark.parametrize("seed", [*EPOCH_ISSUED_TWICE, *NOT_RUNNING, *EAGER_CUT_SHORT])
def test_a_hard_chaos_seed_that_once_failed_keeps_every_invariant(seed: int):
    assert chaos.run_hard(seed, families=1).violations == ()
