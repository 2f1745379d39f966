"""Hypothesis drives a session with arbitrary interleavings; the invariants must hold."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tests.sdk.session_helpers import BOTH, EAGER_ONLY, assignment

from kooper.protocol import member
from kooper.sdk import session as sdk_session

RESOURCES = ["A", "A-0", "A-1", "B", "B-0", "B-1"]
LEASE_MS = 1_000


class SessionMachine(RuleBasedStateMachine):
    """A fake transport: runs actions one by one, in any order, failing some."""

    def __init__(self):
        super().__init__()
        self.session = None
        self.running: dict[str, int] = {}  # what the callbacks believe runs, with its epoch
        self.pending: list[sdk_session.Action] = []
        self.now = 0
        self.generation = 0
        self.accepted: list[int] = []
        self.reported_generations: list[int] = []
        self.target = None

    @rule(cooperative=st.booleans())
    @precondition(lambda self: self.session is None)
    def create(self, cooperative):
        self.session = sdk_session.Session(
            member_name="w-0",
            incarnation="x",
            protocols=BOTH if cooperative else EAGER_ONLY,
            lease_duration_ms=LEASE_MS,
        )
        self.session.join(self.now)

    @rule(
        bump=st.integers(-2, 3),
        chosen=st.sets(st.sampled_from(RESOURCES)),
        revoke=st.sets(st.sampled_from(RESOURCES)),
        eager=st.booleans(),
        epoch=st.integers(0, 2),
    )
    @precondition(lambda self: self.session is not None)
    def assign(self, bump, chosen, revoke, eager, epoch):
        self.generation = max(0, self.generation + bump)
        tasks = [r for r in chosen if "-" in r]
        connectors = [r for r in chosen if "-" not in r]
        revoked = revoke - chosen
        message = assignment(
            self.generation,
            connectors,
            tasks,
            revoked=([r for r in revoked if "-" not in r], [r for r in revoked if "-" in r]),
            protocol="eager" if eager else "compatible",
            epochs={r: epoch for r in chosen},
        )
        before = self.session.state
        if self.session.receive_assignment(message):
            assert not self.accepted or self.generation > self.accepted[-1]
            assert member.accepts_assignments(before)
            self.accepted.append(self.generation)
            self.target = message

    @rule()
    @precondition(lambda self: self.session is not None)
    def fetch(self):
        batch = self.session.next_actions()
        if any(isinstance(action, sdk_session.Start) for action in batch):
            # Every stop the accepted target implies is done before anything starts,
            # and a fenced or leaving member starts nothing.
            assert self.session.state in member.LIVE_STATES
            assigned = self.target.assigned
            assert set(self.running) <= assigned.connectors | assigned.tasks
        if self.session.state is member.MemberState.FENCED:
            assert all(a.lost for a in batch if isinstance(a, sdk_session.Stop))
        self.pending.extend(batch)

    @rule(data=st.data(), fail=st.booleans())
    @precondition(lambda self: self.pending)
    def complete_one(self, data, fail):
        action = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        error = "boom" if fail and not isinstance(action, sdk_session.ReleaseLease) else None
        if isinstance(action, sdk_session.Start):
            assert action.resource not in self.running, "started twice without a stop"
            if error is None:
                self.running[action.resource] = action.epoch
        elif isinstance(action, sdk_session.Stop):
            assert action.resource in self.running, "stopped something not running"
            del self.running[action.resource]
        elif isinstance(action, sdk_session.WriteReport):
            report = action.report
            if error is None:
                assert set(report.owned.connectors | report.owned.tasks) == set(self.running)
                if self.reported_generations:
                    assert report.generation >= self.reported_generations[-1]
                self.reported_generations.append(report.generation)
                assert report.generation == -1 or report.generation in self.accepted
        self.session.done(action, error=error)

    @rule(ms=st.integers(0, 2 * LEASE_MS))
    @precondition(lambda self: self.session is not None)
    def time_passes(self, ms):
        self.now += ms
        self.session.tick(self.now)

    @rule()
    @precondition(lambda self: self.session is not None)
    def renew(self):
        self.session.lease_renewed(self.now)

    @rule()
    @precondition(lambda self: self.session is not None)
    def sigterm(self):
        self.session.terminate()

    @rule()
    @precondition(lambda self: self.session is not None and not self.pending)
    def settle(self):
        """Run to quiescence: fenced or leaving members then run nothing."""
        while True:
            self.fetch()
            if not self.pending:
                break
            while self.pending:
                self.complete_one_fixed(self.pending.pop(0))
        state = self.session.state
        if state in (member.MemberState.FENCED, member.MemberState.LEFT):
            assert self.running == {}
        if state is member.MemberState.LEFT:
            assert self.session.report().owned.tasks == frozenset()

    def complete_one_fixed(self, action):
        if isinstance(action, sdk_session.Start):
            assert action.resource not in self.running
            self.running[action.resource] = action.epoch
        elif isinstance(action, sdk_session.Stop):
            assert action.resource in self.running
            del self.running[action.resource]
        self.session.done(action)

    @invariant()
    def session_owns_what_the_callbacks_run_once_idle(self):
        if self.session is not None and not self.pending:
            assert set(self.session.owned) == set(self.running)

    @invariant()
    def applied_generation_is_one_that_was_accepted(self):
        if self.session is not None and self.session.applied_generation != -1:
            assert self.session.applied_generation in self.accepted


SessionMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_session_state_machine = SessionMachine.TestCase
