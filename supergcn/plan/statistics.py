"""A plan's statistics: per pair of ranks, and in total.

A plan of any strategy records, for every ordered pair (j sends to i) with cut edges, the
cut edges, rows sent, PRE and POST rows, the distinct sources (what post sends) and
destinations (what pre sends), and for hybrid the cover and matching sizes — so the rows
of pre and post follow from any plan, and hybrid's from a hybrid plan
(:func:`strategy_rows`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: The statistics ``pairs.npz`` holds for every pair with cut edges (hybrid adds cover, matching).
PAIR_STATISTICS = ("src", "dst", "cut_edges", "rows", "pre_rows", "post_rows", "distinct_sources",
                   "distinct_destinations")


def plan_totals(strategy: str, num_ranks: int, column: Callable[[str], np.ndarray], sent_by: np.ndarray,
                received_by: np.ndarray, row_costs: tuple[int, int] | None = None) -> dict:
    """``plan.json``'s statistics, summed over the per-pair records.

    Args:
        strategy: the plan's strategy.
        num_ranks: the number of ranks, P.
        column: ``column(name)`` returns a per-pair statistic (``cut_edges``,
            ``distinct_sources``, ``distinct_destinations``).
        sent_by: rows each rank sends per exchange.
        received_by: rows each rank receives per exchange.
        row_costs: the costs of a PRE and a POST row the hybrid cover was weighted by
            (None: the fewest rows).

    Returns:
        ``strategy``, ``num_ranks``, the ``cover`` (hybrid: the PRE and POST row costs it
        is cheapest under, 1 and 1 for the fewest rows; else None), ``total_rows_sent``,
        the busiest sender's and receiver's rows, the directed cut edges, and the rows pre
        and post would send.
    """
    pre_cost, post_cost = (1, 1) if row_costs is None else row_costs
    return {
        "strategy": strategy,
        "cover": {"pre_row_cost": pre_cost, "post_row_cost": post_cost} if strategy == "hybrid" else None,
        "num_ranks": num_ranks,
        "total_rows_sent": int(sent_by.sum()),
        "max_rows_sent_by_rank": int(sent_by.max()),
        "max_rows_received_by_rank": int(received_by.max()),
        "cut_edges_directed": int(column("cut_edges").sum()),
        "rows_if_pre": int(column("distinct_destinations").sum()),
        "rows_if_post": int(column("distinct_sources").sum()),
    }


def strategy_rows(pairs: dict[str, np.ndarray], num_ranks: int, strategy: str) -> dict[str, np.ndarray]:
    """Comm[j][i], the rows rank j sends rank i per exchange, of pre, post and the plan's
    own ``strategy``, from one plan's per-pair statistics (:func:`~supergcn.plan.store.read_plan_pairs`):
    the PRE and POST rows of :func:`strategy_row_kinds` together.

    A plan of any strategy records, for every pair, its cut edges' distinct sources and
    distinct destinations: pre sends one partial row per distinct destination, post one
    raw row per distinct source, so both follow from any plan; hybrid from a hybrid plan.

    Args:
        pairs: the per-pair statistics (``src``, ``dst``, ``pre_rows``, ``post_rows``,
            ``distinct_sources``, ``distinct_destinations``).
        num_ranks: the number of ranks, P.
        strategy: the plan's own strategy.

    Returns:
        ``pre``, ``post`` and ``strategy`` -> a P x P int64 matrix, [j, i] the rows j sends i.
    """
    return {name: pre + post for name, (pre, post) in strategy_row_kinds(pairs, num_ranks, strategy).items()}


def strategy_row_kinds(pairs: dict[str, np.ndarray], num_ranks: int, strategy: str) -> dict[str, tuple]:
    """Comm[j][i] of pre, post and the plan's own ``strategy``, split into PRE rows (partial
    aggregates) and POST rows (raw source rows): what a model whose two kinds of row cost
    differently (GAT, :mod:`supergcn.plan.costs`) needs of a plan.

    Args:
        pairs: the per-pair statistics (``src``, ``dst``, ``pre_rows``, ``post_rows``,
            ``distinct_sources``, ``distinct_destinations``).
        num_ranks: the number of ranks, P.
        strategy: the plan's own strategy.

    Returns:
        ``pre``, ``post`` and ``strategy`` -> (PRE rows, POST rows), two P x P int64 matrices.
    """
    def matrix(key: str | None) -> np.ndarray:
        out = np.zeros((num_ranks, num_ranks), dtype=np.int64)
        if key is not None:
            out[pairs["src"], pairs["dst"]] = pairs[key]
        return out
    return {"pre": (matrix("distinct_destinations"), matrix(None)),
            "post": (matrix(None), matrix("distinct_sources")),
            strategy: (matrix("pre_rows"), matrix("post_rows"))}


def strategy_summary(rows_by_strategy: dict[str, np.ndarray]) -> str:
    """A small text table: rows sent in total and by the busiest rank, per strategy.

    Args:
        rows_by_strategy: strategy -> its P x P matrix of rows sent (:func:`strategy_rows`).

    Returns:
        The table, a header and one line per strategy.
    """
    lines = [f"{'strategy':<8} {'rows sent':>12} {'max by a rank':>14}"]
    for name, rows in rows_by_strategy.items():
        lines.append(f"{name:<8} {int(rows.sum()):>12,} {int(rows.sum(axis=1).max(initial=0)):>14,}")
    return "\n".join(lines)
