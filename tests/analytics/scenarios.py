"""Small hand-made event logs, one run each, with the numbers they must produce."""

from __future__ import annotations

from kooper.core import events

Row = tuple[int, str, str, str]  # ts_ms, member, resource, event

# Two members; r stops on a at 1000 and starts on b at 1500; the run ends at 2000.
HANDOVER: list[Row] = [
    (0, "a", "", "join"),
    (0, "b", "", "join"),
    (10, "a", "r", "start"),
    (1000, "a", "r", "stop"),
    (1500, "b", "r", "start"),
    (2000, "", "", "round"),
]

# r starts on b at 500 while a still runs it until 800.
OVERLAP: list[Row] = [
    (0, "a", "r", "start"),
    (500, "b", "r", "start"),
    (800, "a", "r", "stop"),
    (1000, "", "", "round"),
]

# Eager: c leaves at 100, everyone stops, all restart at 200, the run ends at 300.
EAGER_KILL: list[Row] = [
    (0, "a", "", "join"), (0, "b", "", "join"), (0, "c", "", "join"),
    (10, "a", "r1", "start"), (10, "b", "r2", "start"), (10, "c", "r3", "start"),
    (100, "c", "", "leave"),
    (100, "a", "r1", "stop"), (100, "b", "r2", "stop"),
    (150, "", "", "round"),
    (200, "a", "r1", "start"), (200, "b", "r2", "start"), (200, "a", "r3", "start"),
    (300, "", "", "round"),
]

# Cooperative: the same kill, but only the departed member's resource pauses.
COOP_KILL: list[Row] = [
    row for row in EAGER_KILL if row[3] != "stop" and not (row[0] == 200 and row[2] != "r3")
]

# A leave without stops ends what the member ran.
LEAVE: list[Row] = [
    (0, "a", "r", "start"), (100, "a", "", "leave"), (400, "b", "r", "start"),
    (500, "", "", "round"),
]

# a left at 100 but stops r only at 250, after b started it at 200.
ZOMBIE: list[Row] = [
    (0, "a", "r", "start"), (100, "a", "", "leave"), (200, "b", "r", "start"),
    (250, "a", "r", "stop"), (500, "", "", "round"),
]

# a rejoins at 100 (a restart without leave) and starts r again at 130.
REJOIN: list[Row] = [
    (0, "a", "", "join"), (0, "a", "r", "start"), (100, "a", "", "join"),
    (130, "a", "r", "start"), (200, "", "", "round"),
]

# a left at 100 and b took r over at 150; a rejoins at 200 and starts r at that instant:
# that start is a's new life, so a's first interval ended at its leave.
REJOIN_START: list[Row] = [
    (0, "a", "r", "start"), (100, "a", "", "leave"), (150, "b", "r", "start"),
    (200, "a", "", "join"), (200, "a", "r", "start"), (300, "", "", "round"),
]

# b starts r at the log's last row while a, which never stopped it, still runs it;
# c starts and stops q there while a runs it: a hand-over (stop first) would be none.
END_START: list[Row] = [
    (0, "a", "r", "start"), (0, "a", "q", "start"), (50, "a", "q", "stop"),
    (100, "b", "r", "start"), (100, "c", "q", "start"), (100, "c", "q", "stop"),
    (100, "b", "s", "start"), (100, "d", "s", "start"),
]

# Stop on a and start on b at the same instant.
INSTANT: list[Row] = [
    (0, "a", "r", "start"), (100, "a", "r", "stop"), (100, "b", "r", "start"),
    (300, "", "", "round"),
]

# r pauses 100 ms, runs again, then stops for good at 250; s runs throughout.
STOPPED: list[Row] = [
    (0, "a", "r", "start"), (0, "a", "s", "start"), (100, "a", "r", "stop"),
    (200, "a", "r", "start"), (250, "a", "r", "stop"), (1000, "", "", "round"),
]

# Rounds probe the spread of running resources over live members.
BALANCE: list[Row] = [
    (0, "a", "", "join"), (0, "b", "", "join"),
    (10, "a", "r1", "start"), (10, "a", "r2", "start"), (10, "a", "r3", "start"),
    (20, "", "", "round"),           # a runs 3, b 0 -> 3
    (30, "a", "r3", "stop"), (40, "b", "r3", "start"),
    (50, "", "", "round"),           # 2 vs 1 -> 1
    (60, "c", "", "join"),
    (70, "", "", "round"),           # 2, 1, 0 -> 2
    (80, "b", "", "leave"),
    (90, "", "", "round"),           # a 2, c 0 (b gone) -> 2
]

# The last round probes the state after every row of its instant: b's start there counts
# (its interval is empty, cut by the end of the log, but b runs r2 then).
END_ROUND: list[Row] = [
    (0, "a", "", "join"), (0, "b", "", "join"), (10, "a", "r1", "start"),
    (20, "", "", "round"), (20, "b", "r2", "start"),
]

# A run without any disruption.
QUIET: list[Row] = [(0, "a", "r", "start"), (50, "", "", "round")]

# Pauses and resumes (a connector's state flipping to and from ``paused``) keep a
# resource assigned to its member, so they must not change any metric but
# ``events``. Each list is added to the named scenario; all lie inside its run.
FLIPS: dict[str, list[Row]] = {
    "handover": [
        (200, "a", "r", "pause"), (600, "a", "r", "resume"),
        (800, "a", "r", "pause"),          # still paused when a stops r at 1000
        (1500, "b", "r", "pause"),         # started paused: same instant as the start
        (1700, "b", "r", "resume"),
        (300, "b", "q", "pause"),          # of nothing b runs: no resource appears
    ],
    "coop_kill": [
        (10, "c", "r3", "pause"),          # c leaves at 100 with r3 paused
        (50, "a", "r1", "pause"), (120, "a", "r1", "resume"),
        (200, "a", "r3", "pause"), (250, "a", "r3", "resume"),
        (280, "b", "r2", "pause"),         # paused when the log ends
    ],
    "balance": [
        (10, "a", "r1", "pause"), (45, "b", "r3", "pause"), (85, "a", "r1", "resume"),
    ],
    "zombie": [
        (150, "a", "r", "pause"),          # the zombie pauses, then stops at 250
        (200, "b", "r", "pause"), (400, "b", "r", "resume"),
    ],
}
PAUSED_MS: dict[str, int] = {
    "handover": 400 + 200 + 200,   # a: 200-600, 800-1000 (its stop); b: 1500-1700
    "coop_kill": 90 + 70 + 50 + 20,  # c until its leave, a's r1 and r3, b's r2 to the end
    "balance": 75 + 35,            # a's r1 10-85; b's r3 45 until b leaves at 80
    "zombie": 100 + 200,           # the zombie until its stop; b 200-400
}
"""``paused_ms`` of each scenario with its flips."""
PAUSED_TWINS: dict[str, str] = {f"{run}_paused": run for run in FLIPS}
"""Scenario with flips -> the scenario without them."""

SCENARIOS: dict[str, tuple[list[Row], str, str]] = {
    "handover": (HANDOVER, "compatible", "kooper"),
    "overlap": (OVERLAP, "eager", "kip415"),
    "eager_kill": (EAGER_KILL, "eager", "kooper"),
    "coop_kill": (COOP_KILL, "compatible", "kooper"),
    "leave": (LEAVE, "compatible", "kooper"),
    "zombie": (ZOMBIE, "compatible", "kooper"),
    "rejoin": (REJOIN, "compatible", "kooper"),
    "rejoin_start": (REJOIN_START, "compatible", "kooper"),
    "instant": (INSTANT, "compatible", "kooper"),
    "stopped": (STOPPED, "compatible", "kooper"),
    "balance": (BALANCE, "compatible", "kooper"),
    "timeline": ([*HANDOVER, (1500, "a", "q", "start")], "compatible", "kooper"),
    "quiet": (QUIET, "compatible", "kooper"),
    "end_start": (END_START, "compatible", "kooper"),
    "end_round": (END_ROUND, "compatible", "kooper"),
}
SCENARIOS.update(
    {
        paused: (sorted([*SCENARIOS[run][0], *FLIPS[run]], key=lambda row: row[0]),
                 *SCENARIOS[run][1:])
        for paused, run in PAUSED_TWINS.items()
    }
)


def to_events(rows: list[Row], *, run: str, protocol: str, policy: str) -> list[events.Event]:
    """Rows as event-log events of group ``g``."""
    return [
        events.Event(ts_ms=ts, run=run, group="g", member=member, resource=resource,
                     event=events.Kind(kind), protocol=protocol, policy=policy)
        for ts, member, resource, kind in rows
    ]


def all_events() -> list[events.Event]:
    """Every scenario, each its own run, in one log."""
    out: list[events.Event] = []
    for run, (rows, protocol, policy) in SCENARIOS.items():
        out += to_events(rows, run=run, protocol=protocol, policy=policy)
    return out
