"""Communication-volume summaries read from plan manifests (rows of features sent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from supergcn.plan import read_plan_manifest


def per_strategy_rows(manifest: dict) -> dict[str, tuple[int, int]]:
    """(total rows sent, max rows sent by one rank) for pre, post and the plan's own
    strategy. Pre and post follow from each pair's distinct destinations / sources."""
    num_ranks = manifest["num_ranks"]
    result = {}
    for strategy, key in (("pre", "distinct_destinations"), ("post", "distinct_sources")):
        sent = np.zeros(num_ranks, dtype=np.int64)
        for pair in manifest["pairs"]:
            sent[pair["src"]] += pair[key]
        result[strategy] = (int(sent.sum()), int(sent.max()))
    result[manifest["strategy"]] = (manifest["total_rows_sent"], manifest["max_rows_sent_by_rank"])
    return result


def wire_bytes(rows: np.ndarray, width: int, bits: int, parameter_bytes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(data bytes, parameter bytes) on the wire for each entry of ``rows``, the rows one
    sender sends one receiver per exchange. FP32 moves 4 bytes per value. A b-bit
    exchange packs 8/b rows per byte column, padding each pair's chunk to whole bytes, and
    sends two parameters (zero point, scale) of ``parameter_bytes`` each per row."""
    from supergcn.quantization import packed_rows

    rows = np.asarray(rows, dtype=np.int64)
    if bits == 32:
        return rows * width * 4, np.zeros_like(rows)
    return packed_rows(rows.ravel(), bits).reshape(rows.shape) * width, rows * 2 * parameter_bytes


def layer_bytes(rows_per_pair: np.ndarray, width: int, bits: int) -> tuple[int, int]:
    """Total (data bytes, bfloat16 parameter bytes) of one layer's exchange (:func:`wire_bytes`)."""
    data, params = wire_bytes(rows_per_pair, width, bits)
    return int(data.sum()), int(params.sum())


def strategy_summary(manifest: dict) -> str:
    rows = per_strategy_rows(manifest)
    lines = [f"{'strategy':<8} {'rows sent':>12} {'max by a rank':>14}"]
    lines += [f"{name:<8} {total:>12,} {peak:>14,}" for name, (total, peak) in rows.items()]
    return "\n".join(lines)


def rows_table(plan_dirs: list[str | Path]) -> pd.DataFrame:
    """One row per plan: its directory, P, strategy and rows sent, with pre/post for comparison."""
    records = []
    for directory in plan_dirs:
        manifest = read_plan_manifest(directory)
        rows = per_strategy_rows(manifest)
        total, peak = rows[manifest["strategy"]]
        records.append({
            "plan": str(directory), "P": manifest["num_ranks"], "strategy": manifest["strategy"],
            "rows_sent": total, "max_rows_by_rank": peak,
            "rows_pre": rows["pre"][0], "rows_post": rows["post"][0],
            "reduction_vs_best_single": (min(rows["pre"][0], rows["post"][0]) / total) if total else 1.0,
        })
    return pd.DataFrame.from_records(records).sort_values(["P", "strategy"], kind="stable")
