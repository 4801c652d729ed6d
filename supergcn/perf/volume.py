"""Communication volume of plans: rows of features each strategy sends (``supergcn volume``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from supergcn.plan.store import plan_strategy_rows


def rows_table(plan_dirs: list[str | Path]) -> pd.DataFrame:
    """One row per plan: its directory, P, strategy and rows sent (in total and by the
    busiest rank), with the rows pre and post would send for comparison."""
    records = []
    for directory in plan_dirs:
        manifest, rows = plan_strategy_rows(directory)
        own = rows[manifest["strategy"]]
        total = int(own.sum())
        records.append({
            "plan": str(directory), "P": manifest["num_ranks"], "strategy": manifest["strategy"],
            "rows_sent": total, "max_rows_by_rank": int(own.sum(axis=1).max(initial=0)),
            "rows_pre": int(rows["pre"].sum()), "rows_post": int(rows["post"].sum()),
            "reduction_vs_best_single": (min(rows["pre"].sum(), rows["post"].sum()) / total) if total else 1.0,
        })
    return pd.DataFrame.from_records(records).sort_values(["P", "strategy"], kind="stable")
