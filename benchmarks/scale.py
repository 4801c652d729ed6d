"""Scale benchmark: what preprocessing costs per adjacency entry, extrapolated to the paper's graphs.

    .venv/bin/python benchmarks/scale.py [--divisors 64 32 16] [--parts 64 512 8192] [--threads 2]
        [--workdir DIR]

Generates ``synthetic-papers100M`` (ogbn-papers100M's nodes, edges, 128 features, 172
classes, 1.1 % training nodes) shrunk to 1/d of its nodes and edges for each divisor d,
and runs prepare, then the KaMinPar partition and the hybrid plan at each P, every step in
a fresh process that reports its own peak resident memory (``benchmarks/foundation.py``).
For each step it fits seconds and peak bytes as a + b x entries over the sizes (least
squares) and prints, per step, the measured bytes per entry and the extrapolation to
papers100M, mag240M and IGB260M, beside a Fugaku compute node (28 GiB usable) and a
pre/post node (3-hour limit). The per-rank training state at P = 512 is extrapolated from
the measured rank files (the plan) and the rank's feature rows. Seconds are this machine's
(its threads), so the time extrapolation is an upper bound for a 48-core node only as far
as each step uses the threads it is given.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from supergcn.partition.store import Engine
from supergcn.perf.steps import in_child, in_workdir, partition_step, plan_step, prepare_step

#: Directed adjacency entries (each undirected edge twice), nodes and feature widths of the
#: paper's largest graphs (Table 2; OGB-LSC; IGB), undirected as the paper trains them.
TARGETS = {"ogbn-papers100M": (3_231_371_744, 111_059_956, 128),
           "ogb-lsc-mag240M": (5_186_482_424, 121_751_666, 768),
           "IGB260M": (7_991_554_066, 269_346_174, 1024)}
FUGAKU_NODE_GIB = 28
FUGAKU_RANKS_PER_NODE = 48
PREPOST_SECONDS = 3 * 3600
GIB = 2**30


def measure(args, workdir: Path) -> list[dict]:
    rows = []
    engine = Engine("kaminpar", threads=args.threads)
    for divisor in args.divisors:
        graph_dir = workdir / f"d{divisor}" / "graph"
        meta, cost = in_child(prepare_step, "synthetic-papers100M", 1 / divisor, graph_dir)
        entries, nodes = meta["num_edges_directed"], meta["num_nodes"]
        rows.append({"divisor": divisor, "step": "prepare", "entries": entries, **cost})
        for parts in args.parts:
            partition_dir, plan_dir = workdir / f"d{divisor}" / f"p{parts}", workdir / f"d{divisor}" / f"plan{parts}"
            _, cost = in_child(partition_step, graph_dir, parts, partition_dir, 1.0, engine)
            rows.append({"divisor": divisor, "step": f"partition P={parts}", "entries": entries, **cost})
            plan, cost = in_child(plan_step, graph_dir, partition_dir, plan_dir)
            rank_bytes = max(path.stat().st_size for path in plan_dir.glob("rank_*.npz"))
            rows.append({"divisor": divisor, "step": f"plan P={parts}", "entries": entries, "nodes": nodes,
                         "largest_rank_file_bytes": rank_bytes, **cost})
    return rows


def fit(rows: list[dict], key: str) -> tuple[float, float]:
    """Least-squares a + b x entries of ``key`` over the sizes of one step."""
    entries = np.array([r["entries"] for r in rows], dtype=np.float64)
    values = np.array([r[key] for r in rows], dtype=np.float64)
    slope, intercept = np.polyfit(entries, values, 1)
    return intercept, slope


def report(rows: list[dict]) -> str:
    steps = list(dict.fromkeys(r["step"] for r in rows))
    lines = ["measured (this machine) and extrapolated (a + b x entries, least squares over the sizes)", "",
             f"{'step':<20} " + " ".join(f"{'1/' + str(r['divisor']):>16}" for r in rows if r["step"] == "prepare")
             + "   " + " ".join(f"{name:>24}" for name in TARGETS)]
    for step in steps:
        mine = [r for r in rows if r["step"] == step]
        measured = " ".join(f"{r['seconds']:>6.0f}s {r['peak_gib'] * GIB / r['entries']:>5.1f}B/e" for r in mine)
        seconds, peak = fit(mine, "seconds"), fit([{**r, "peak": r["peak_gib"] * GIB} for r in mine], "peak")
        projected = " ".join(f"{(seconds[0] + seconds[1] * e) / 3600:>8.1f} h {(peak[0] + peak[1] * e) / GIB:>9.0f} GiB"
                             for e, _, _ in TARGETS.values())
        lines.append(f"{step:<20} {measured}   {projected}")
    first = steps[1].removeprefix("partition ")
    chain = [fit([r for r in rows if r["step"] == s], "seconds") for s in ("prepare", f"partition {first}",
                                                                            f"plan {first}")]
    lines += ["", f"prepare, then partition and plan at {first}, on this machine: "
              + ", ".join(f"{name} {sum(a + b * e for a, b in chain) / 3600:.1f} h"
                          for name, (e, _, _) in TARGETS.items())
              + f" (a pre/post allocation: {PREPOST_SECONDS / 3600:.0f} h)"]
    plans = [r for r in rows if r["step"] == "plan P=512"]
    if plans:
        budget = FUGAKU_NODE_GIB * GIB / FUGAKU_RANKS_PER_NODE
        lines.append("")
        for name, (e, n, width) in TARGETS.items():
            plan_bytes = fit(plans, "largest_rank_file_bytes")
            rank_plan = plan_bytes[0] + plan_bytes[1] * e
            rank_features = n / 512 * width * 4
            state = rank_plan + rank_features
            lines.append(f"{name} at P = 512: largest rank file {rank_plan / GIB:.2f} GiB + feature rows "
                         f"{rank_features / GIB:.2f} GiB = {state / GIB:.2f} GiB before activations; "
                         f"{FUGAKU_RANKS_PER_NODE} ranks in {FUGAKU_NODE_GIB} GiB allow {budget / GIB:.2f} GiB each")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--divisors", type=int, nargs="+", default=[64, 32, 16],
                        help="generate synthetic-papers100M at 1/d of its size for each d")
    parser.add_argument("--parts", type=int, nargs="+", default=[64, 512, 8192])
    parser.add_argument("--threads", type=int, default=2, help="KaMinPar's threads")
    parser.add_argument("--workdir", type=Path, help="keep the outputs here instead of a temporary directory")
    rows = in_workdir(parser.parse_args(), measure)
    print(json.dumps(rows, indent=1))
    print(report(rows))


if __name__ == "__main__":
    main()
