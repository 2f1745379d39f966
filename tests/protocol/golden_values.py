"""The messages the golden vectors under ``golden/`` stand for (one entry per file)."""

from kooper.core import model
from kooper.protocol import messages

CAT = model.ConnectorsAndTasks.of

GOLDEN: dict[str, messages.Assignment | messages.Report] = {
    "v1/assignment_full.json": messages.Assignment(
        group="connect",
        member="workers-0",
        generation=7,
        protocol=model.Protocol.COMPATIBLE,
        assigned=CAT(["A", "my-conn-2"], ["A-0", "A-2", "A-10", "my-conn-2-0", "B-1"]),
        revoked=CAT(["C"], ["A-1", "C-0"]),
        delay_ms=120_000,
        leader="kooper-operator-7d9f/1a2b",
        epochs={"A": 3, "A-0": 1, "A-10": 5, "B-1": 2, "my-conn-2-0": 1},
        configs={
            "A": {"connector.class": "counter", "topic": "orders"},
            "B": {"connector.class": "sleep"},
            "my-conn-2": {"note": "caf\u00e9 \u2615"},
        },
        states={"B": "paused"},
        policy="kooper",
    ),
    # A document planned for one incarnation of the member (the optional key, added in
    # v1 without a version bump: older readers ignore it, as the forward-compat rule says).
    "v1/assignment_incarnation.json": messages.Assignment(
        group="connect",
        member="workers-4",
        generation=9,
        protocol=model.Protocol.COMPATIBLE,
        assigned=CAT(["A"], ["A-1", "A-3"]),
        leader="kooper-operator-7d9f/1a2b",
        epochs={"A": 3, "A-1": 2, "A-3": 4},
        policy="kooper",
        incarnation="9e0d4c21",
    ),
    # The membership epoch (optional, added within v1; older readers ignore it and act
    # as before): the document belongs to membership 7 of workers-4.
    "v1/assignment_member_epoch.json": messages.Assignment(
        group="connect",
        member="workers-4",
        generation=21,
        protocol=model.Protocol.COMPATIBLE,
        assigned=CAT(["A"], ["A-1", "A-3"]),
        leader="kooper-operator-7d9f/1a2b",
        epochs={"A": 3, "A-1": 2, "A-3": 4},
        policy="kooper",
        incarnation="9e0d4c21",
        member_epoch=7,
    ),
    "v1/report_member_epoch.json": messages.Report(
        member="workers-4",
        incarnation="9e0d4c21",
        protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
        generation=21,
        owned=CAT(["A"], ["A-1", "A-3"]),
        member_epoch=7,
    ),
    # The rejoin count (optional, added within v1): workers-4 fenced itself twice in this
    # incarnation; membership 9 was issued for its second rejoin, and a worker acts only
    # on documents issued for its current count.
    "v1/assignment_rejoins.json": messages.Assignment(
        group="connect",
        member="workers-4",
        generation=24,
        protocol=model.Protocol.COMPATIBLE,
        assigned=CAT([], ["A-1"]),
        leader="kooper-operator-7d9f/1a2b",
        epochs={"A-1": 5},
        policy="kooper",
        incarnation="9e0d4c21",
        member_epoch=9,
        rejoins=2,
    ),
    "v1/report_rejoins.json": messages.Report(
        member="workers-4",
        incarnation="9e0d4c21",
        protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
        generation=21,
        fenced=True,
        member_epoch=7,
        rejoins=2,
    ),
    # The last report of a worker leaving on SIGTERM (optional, added within v1): it
    # stopped everything and starts nothing again; the operator may read it in the
    # Lease's last version after the Lease is gone.
    "v1/report_left.json": messages.Report(
        member="workers-2",
        incarnation="3f7a9b10",
        protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
        generation=12,
        member_epoch=4,
        left=True,
    ),
    "v1/assignment_eager_revoke_all.json": messages.Assignment(
        group="connect",
        member="workers-3",
        generation=8,
        protocol=model.Protocol.EAGER,
        assigned=model.EMPTY,
        revoked=CAT(["A"], ["A-0", "A-1"]),
    ),
    "v1/report_full.json": messages.Report(
        member="workers-0",
        incarnation="5c1e0a77",
        protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
        generation=7,
        owned=CAT(["A"], ["A-0", "A-2", "A-10", "B-1"]),
        failed={"A-2": "on_assigned timed out after 10.0s"},
        fenced=False,
    ),
    "v1/report_fenced.json": messages.Report(
        member="workers-2",
        incarnation="0b8d33f1",
        protocols=frozenset({model.Protocol.EAGER}),
        generation=5,
        fenced=True,
    ),
    "v1/assignment_minimal.json": messages.Assignment(
        group="connect",
        member="workers-0",
        generation=1,
        protocol=model.Protocol.COMPATIBLE,
        assigned=model.EMPTY,
    ),
    "v1/report_minimal.json": messages.Report(
        member="workers-0",
        incarnation="",
        protocols=frozenset({model.Protocol.EAGER}),
        generation=-1,
    ),
    # failureCounts came later within v1 (older readers ignore it): how often each
    # failing resource failed in this incarnation, task numbers grouped by count.
    "v1/report_failure_counts.json": messages.Report(
        member="workers-0",
        incarnation="5c1e0a77",
        protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
        generation=7,
        owned=CAT(["A"], ["A-0", "A-1", "A-2", "B-1"]),
        failed={"A-3": "on_assigned raised ValueError: no such topic"},
        failure_counts={"A-3": 2, "A-4": 1, "A-5": 1, "C": 3},
    ),
    # Version 2, compact: task numbers as ranges ("0-2,10") or a bitmap ("~CQI": bits
    # 0, 3 and 9), next to a plain list, which v2 still reads.
    "v2/report_compact.json": messages.Report(
        member="workers-0",
        incarnation="5c1e0a77",
        protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
        generation=12,
        owned=CAT(["A"], ["A-0", "A-1", "A-2", "A-10", "B-0", "B-3", "B-9", "C-5"]),
        failed={"D-7": "on_assigned raised OSError: disk full"},
        failure_counts={**{f"D-{n}": 1 for n in range(7)}, "D-7": 4},
    ),
    # Written by a hypothetical newer writer: extra fields everywhere, a protocol we
    # do not know in the report. Our highest reader must accept them and ignore the extras
    # (the v2 files were written as that before version 2 existed; v9 keeps the point).
    "v2/assignment_extra_fields.json": messages.Assignment(
        group="connect",
        member="workers-1",
        generation=12,
        protocol=model.Protocol.COMPATIBLE,
        assigned=CAT(["B"], ["B-0", "B-2"]),
        revoked=CAT([], ["A-1"]),
        leader="kooper-operator-7d9f/1a2b",
        epochs={"B": 4, "B-0": 1, "B-2": 2},
        configs={"B": {"topics": "orders"}},
        policy="kooper",
    ),
    "v2/report_extra_fields.json": messages.Report(
        member="workers-1",
        incarnation="3f2a9c10",
        protocols=frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE}),
        generation=11,
        owned=CAT(["B"], ["A-1", "B-0"]),
    ),
}
GOLDEN["v9/assignment_extra_fields.json"] = GOLDEN["v2/assignment_extra_fields.json"]
GOLDEN["v9/report_extra_fields.json"] = GOLDEN["v2/report_extra_fields.json"]

ENCODER_OUTPUT = (
    "v1/assignment_full.json",
    "v1/assignment_eager_revoke_all.json",
    "v1/assignment_incarnation.json",
    "v1/report_full.json",
    "v1/report_fenced.json",
    "v1/report_failure_counts.json",
    "v1/assignment_member_epoch.json",
    "v1/report_member_epoch.json",
    "v1/assignment_rejoins.json",
    "v1/report_rejoins.json",
    "v1/report_left.json",
)
"""Golden files that are byte-for-byte what the current encoder writes."""
