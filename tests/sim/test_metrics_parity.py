"""``sim.metrics`` and ``e2e/invariants`` read one log the same way: who runs what at the
end, and how many intervals began over another (two readers of ``docs/events.md``)."""

from __future__ import annotations

from e2e import invariants
from hypothesis import given, settings
from hypothesis import strategies as st

from kooper.core import events as ev
from kooper.sim import metrics

K = ev.Kind
ON_RESOURCES = (K.START, K.STOP, K.PAUSE, K.RESUME)

row = st.tuples(st.integers(0, 6),
                st.sampled_from([K.START, K.START, K.STOP, K.LEAVE, K.JOIN, K.PAUSE, K.RESUME]),
                st.sampled_from(["w1", "w2", "w3"]), st.sampled_from(["A-0", "A-1"]))


@settings(max_examples=500, deadline=None)
@given(spec=st.lists(row, min_size=1, max_size=14))
def test_the_drill_metrics_and_the_drill_invariants_agree(spec):
    log = [ev.Event(ts, "r", "g", member, resource if kind in ON_RESOURCES else "", kind)
           for ts, kind, member, resource in spec]
    assert {resource: members for (_, resource), members in metrics.running(log).items()} \
        == invariants.running_at_end(log)
    assert metrics.run_metrics(log).running_at_end == len(invariants.running_at_end(log))
    assert metrics.run_metrics(log).overlaps == len(invariants.overlaps(log))
