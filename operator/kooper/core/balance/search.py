"""Which members take each connector's remainder task, keeping the most tasks in place.

``target.spread_target`` fixes how many remainders each connector hands out and each
member takes; the search here chooses who takes which. ``fewest_moves`` is exact (a
minimum-cost flow); above ``target._FLOW_BUDGET`` ``improve`` exchanges remainders
between members from ``paths.from_holdings``'s answer (or the greedy's) instead.
Both answer, per connector, the set
of members holding ``n // k + 1`` of its tasks; ``row`` turns that into a target row.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence

from kooper.core import ids

Shape = Mapping[str, tuple[int, int]]
"""Per connector ``divmod(n, k)``: what every member holds of it, and its remainders."""

_Graph = list[list[list[int]]]
"""Per node, its edges: ``[to, capacity, cost, index of the reverse edge in graph[to]]``."""

_SOURCE, _BONUS = 0, 1
"""The flow network's first nodes; the connectors follow, then the members, then the sink."""


def row(floor: int, chosen: set[ids.WorkerId] | frozenset[ids.WorkerId],
        members: Sequence[ids.WorkerId]) -> dict[ids.WorkerId, int]:
    """A connector's target: ``floor`` each and one more for the ``chosen`` (members
    that hold none of it are left out)."""
    return {m: floor + (1 if m in chosen else 0) for m in members if floor or m in chosen}


def fewest_moves(
    rows: Sequence[str],
    shape: Shape,
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    members: Sequence[ids.WorkerId],
    *,
    demands: tuple[int, int],
    moved: Callable[[str, ids.WorkerId, int], int] | None = None,
) -> dict[str, set[ids.WorkerId]]:
    """Which members take each connector's remainder, keeping the most tasks in place.

    A minimum-cost flow: each connector sends its ``n % k`` remainders to distinct
    members, each member takes ``base`` of them and at most ``extra_members`` members
    one more; a remainder given to a member already holding more than ``n // k`` of that
    connector costs -1 (a task that stays). Successive shortest paths (Bellman-Ford, the
    graph is small: only unspread groups get here) find the optimum.

    With ``moved``, a task that stays costs ``-scale + epoch`` instead of -1: ``scale``
    exceeds any sum of epochs the remainders can keep, so the fewest moves come first
    and, among those, the tasks handed out least stay.
    """
    row_node = {g: 2 + i for i, g in enumerate(rows)}
    col_node = {m: 2 + len(rows) + j for j, m in enumerate(members)}
    costs = _stay_costs(rows, shape, counts, moved)
    graph = _network(row_node, col_node, shape, demands, costs)
    _saturate(graph, _SOURCE, len(graph) - 1)
    members_of = {col_node[m]: m for m in members}
    return {
        group: {
            members_of[to]
            for to, capacity, _, _ in graph[row_node[group]]
            if to in members_of and capacity == 0
        }
        for group in rows
    }


def _stay_costs(
    rows: Sequence[str],
    shape: Shape,
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    moved: Callable[[str, ids.WorkerId, int], int] | None,
) -> dict[tuple[str, ids.WorkerId], int]:
    """Per (connector, member) already holding its extra task, the cost of keeping it
    there: -1, or with ``moved`` ``epoch - scale``."""
    no_counts: Mapping[ids.WorkerId, int] = {}
    stays: dict[tuple[str, ids.WorkerId], int] = {
        (group, member): moved(group, member, shape[group][0]) if moved else 0
        for group in rows
        for member, count in counts.get(group, no_counts).items()
        if count > shape[group][0]
    }
    scale = sum(shape[group][1] for group in rows) * (max(stays.values(), default=0) + 1) + 1
    return {key: (epoch - scale if moved else -1) for key, epoch in stays.items()}


def _network(
    row_node: Mapping[str, int],
    col_node: Mapping[ids.WorkerId, int],
    shape: Shape,
    demands: tuple[int, int],
    costs: Mapping[tuple[str, ids.WorkerId], int],
) -> _Graph:
    """The flow network: source -> connector (its remainders) -> member (one each, at
    ``costs``) -> sink (``base`` each), or -> bonus -> sink for ``extra_members`` more."""
    base, extra_members = demands
    sink = 2 + len(row_node) + len(col_node)
    graph: _Graph = [[] for _ in range(sink + 1)]

    def edge(a: int, b: int, capacity: int, cost: int) -> None:
        graph[a].append([b, capacity, cost, len(graph[b])])
        graph[b].append([a, 0, -cost, len(graph[a]) - 1])

    for group, node in row_node.items():
        edge(_SOURCE, node, shape[group][1], 0)
        for member, column in col_node.items():
            edge(node, column, 1, costs.get((group, member), 0))
    for column in col_node.values():
        if base:
            edge(column, sink, base, 0)
        if extra_members:
            edge(column, _BONUS, 1, 0)
    if extra_members:
        edge(_BONUS, sink, extra_members, 0)
    return graph


def _saturate(graph: _Graph, source: int, sink: int) -> None:
    """Successive shortest paths: push one unit along a cheapest path while one exists."""
    while (parent := _cheapest_path(graph, source, sink)) is not None:
        node = sink
        while node != source:
            step = parent[node]
            assert step is not None
            previous, index = step
            forward = graph[previous][index]
            forward[1] -= 1
            graph[node][forward[3]][1] += 1
            node = previous


def _cheapest_path(graph: _Graph, source: int, sink: int) -> list[tuple[int, int] | None] | None:
    """Each node's (node, edge index) on a cheapest path from ``source`` over edges with
    capacity left (Bellman-Ford with a queue), or None when ``sink`` is out of reach."""
    infinity = 1 << 60
    distance = [infinity] * len(graph)
    parent: list[tuple[int, int] | None] = [None] * len(graph)
    distance[source] = 0
    queue = deque([source])
    queued = [False] * len(graph)
    queued[source] = True
    while queue:
        node = queue.popleft()
        queued[node] = False
        for index, (to, capacity, cost, _) in enumerate(graph[node]):
            if capacity > 0 and distance[node] + cost < distance[to]:
                distance[to] = distance[node] + cost
                parent[to] = (node, index)
                if not queued[to]:
                    queued[to] = True
                    queue.append(to)
    return None if distance[sink] == infinity else parent


def improve(
    target: Mapping[str, Mapping[ids.WorkerId, int]],
    shape: Shape,
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    members: Sequence[ids.WorkerId],
    budget: int = 10_000,
) -> dict[str, set[ids.WorkerId]]:
    """Exchange remainders between members while that keeps more tasks where they are.

    A member that holds a connector's extra task but was not given the remainder (and
    one that was given it without holding it) trade places, either directly when
    their remainder totals allow, or through a second connector the other way round.
    Both keep every row and column sum, so the target stays balanced and spread; each
    exchange keeps one more task in place, so the loop ends (``budget`` bounds it).
    Starts from ``target`` (the greedy's rows); returns the members given each
    connector's remainder.
    """
    no_counts: Mapping[ids.WorkerId, int] = {}
    extras = {
        group: {m for m, n in target[group].items() if n > floor}
        for group, (floor, extra) in shape.items() if extra
    }
    wants = {
        group: {m for m, n in counts.get(group, no_counts).items() if n > shape[group][0]}
        for group in extras
    }
    total = Counter[ids.WorkerId]()
    for chosen in extras.values():
        total.update(chosen)
    low = min((total.get(m, 0) for m in members), default=0)
    order = sorted(extras)
    improved = True
    while improved and budget > 0:
        improved, budget = _exchange(order, extras, wants, total, (low, budget))
    return extras


def _exchange(
    order: Sequence[str],
    extras: dict[str, set[ids.WorkerId]],
    wants: Mapping[str, set[ids.WorkerId]],
    total: Counter[ids.WorkerId],
    limits: tuple[int, int],
) -> tuple[bool, int]:
    """Make the first exchange that keeps one more task in place (``extras`` and ``total``
    updated, connectors tried in ``order``); whether there was one, and the budget
    (``limits``: the lowest remainder total, the pairs that may still be tried) less
    the pairs tried. None is made once the budget is spent."""
    low, budget = limits
    for group in order:
        chosen = extras[group]
        for newcomer in sorted(wants[group] - chosen):
            for leaver in sorted(chosen - wants[group]):
                if budget <= 0:
                    return False, budget
                budget -= 1
                if total[newcomer] == low and total[leaver] == low + 1:
                    # A direct trade: they swap remainder totals too.
                    total[newcomer] += 1
                    total[leaver] -= 1
                else:
                    via = _via(order, extras, wants, (newcomer, leaver))
                    if via is None:
                        continue
                    extras[via].discard(newcomer)
                    extras[via].add(leaver)
                chosen.discard(leaver)
                chosen.add(newcomer)
                return True, budget
    return False, budget


def _via(
    order: Sequence[str],
    extras: Mapping[str, set[ids.WorkerId]],
    wants: Mapping[str, set[ids.WorkerId]],
    pair: tuple[ids.WorkerId, ids.WorkerId],
) -> str | None:
    """A second connector whose remainder can go the other way round: from the newcomer
    of ``pair``, which does not hold its extra task, to its leaver."""
    newcomer, leaver = pair
    return next(
        (
            other for other in order
            if newcomer in extras[other]
            and leaver not in extras[other]
            and newcomer not in wants[other]
        ),
        None,
    )
