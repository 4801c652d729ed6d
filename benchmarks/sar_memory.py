"""SAR's GAT against GAT's one-shot exchange: peak resident memory per rank, one run each, on
the products shape shrunk to fit this machine.

    .venv/bin/python benchmarks/sar_memory.py [--scale 0.25] [--parts 4 8] [--epochs 2]
        [--hidden 32] [--heads 4] [--threads 1] [--allocator auto] [--out sar-memory-gat.json]

Generates ``synthetic-products`` (ogbn-products' degree, 100 features, 47 classes and split)
shrunk to ``--scale`` of its nodes and edges, so that P = 4 and 8 ranks of GAT fit in this
machine's 24 GiB together: whole, at hidden 32 in 2 heads, GAT's one-shot ranks at P = 4
were killed for memory past 6 GiB each (the planted halo is most of the graph), and SAR's
reached 6 GiB; at a quarter of the graph and hidden 256, so were the one-shot ranks. At each
P it partitions it with METIS, plans GAT's hybrid plan (its cover weighted by attention's
costs) and the post plan, and runs GAT (3 layers, ``--hidden`` in ``--heads``) once each:
the one-shot exchange on the hybrid plan, the one-shot exchange on the post plan, and
``--sar sar`` on the post plan. It prints each run's largest rank's peak resident memory (as
every run records it) and what the one-shot exchange's received rows and scalars take of it:
every rank's, at once, at the widest layer (what SAR replaces by one peer's) and over all
layers (what the one-shot autograd keeps for the backward, which SAR keeps none of), from
the plans.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from training import run_supergcn

from supergcn.data.graph import load_graph
from supergcn.models import card
from supergcn.partition.store import load_partition, run_partition
from supergcn.perf.steps import prepare_step
from supergcn.plan.costs import row_costs
from supergcn.plan.store import load_rank_plan, run_plan

GIB = 2**30
#: The runs at each P: name, plan directory, extra options (the one-shot post run, a reference, last).
RUNS = (("one-shot, hybrid", "hybrid", ()), ("SAR", "post", ("--sar", "sar")), ("one-shot, post", "post", ()))


def prepare(root: Path, scale: float, parts: list[int], hidden: int, heads: int) -> int:
    """The shrunk graph, its partitions and both plans at each P; returns its classes."""
    meta = prepare_step("synthetic-products", scale, root / "g")
    graph = load_graph(root / "g")
    costs = row_costs(card("gat"), 3, hidden, heads, graph.num_classes)
    for p in parts:
        manifest = run_partition(graph, meta["hash"], p, root / f"p{p}")
        partition, _ = load_partition(root / f"p{p}", meta["hash"])
        run_plan(graph, meta["hash"], partition, manifest["partition_hash"], "hybrid", root / f"p{p}-hybrid", costs)
        run_plan(graph, meta["hash"], partition, manifest["partition_hash"], "post", root / f"p{p}-post")
    return graph.num_classes


def received_bytes(plan_dir: Path, parts: int, widths: list[int], heads: int) -> tuple[int, int]:
    """The largest rank's received rows and scalars of the one-shot GAT exchange (PRE rows:
    H·C values and 2H scalars, POST rows: H·C and H): at the widest layer, and over all layers."""
    plans = [load_rank_plan(plan_dir, rank) for rank in range(parts)]
    widest = every = 0
    for rank, plan in enumerate(plans):
        pre = sum(int(other.send_pre_counts[rank]) for other in plans)
        post = int(plan.recv_counts.sum()) - pre
        per_layer = [4 * (pre * (width + 2 * heads) + post * (width + heads)) for width in widths]
        widest, every = max(widest, max(per_layer)), max(every, sum(per_layer))
    return widest, every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.25)
    parser.add_argument("--parts", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="threads per rank")
    parser.add_argument("--allocator", default="auto", help="SUPERGCN_ALLOCATOR of the runs: auto (mimalloc, "
                        "which keeps every freed page), glibc (returns large blocks)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = []
    with tempfile.TemporaryDirectory(prefix="supergcn-sar-memory-") as scratch:
        root = Path(scratch)
        classes = prepare(root, args.scale, args.parts, args.hidden, args.heads)
        widths = [args.hidden, args.hidden, args.heads * classes]  # H·C of each layer's rows
        for parts in args.parts:
            at_once, kept = received_bytes(root / f"p{parts}-hybrid", parts, widths, args.heads)
            peaks = {}
            for name, plan, extra in RUNS:
                out = root / f"P{parts}-{plan}-{len(extra)}.jsonl"
                try:
                    lines = run_supergcn(root, parts, args.threads, out, "--model", "gat", "--epochs", args.epochs,
                                         "--hidden", args.hidden, "--heads", args.heads, "--checkpoint-every", 0,
                                         *extra, plan=f"p{parts}-{plan}", allocator=args.allocator)
                except subprocess.CalledProcessError as failed:  # a rank killed for memory is a result here
                    print(f"P = {parts} {name:<17} failed: exit status {failed.returncode} (9: a rank was killed, "
                          "for memory where the kernel's log says so)", flush=True)
                    report.append({"P": parts, "run": name, "failed": failed.returncode})
                    continue
                summary, last = lines[-1], [line for line in lines if line.get("type") == "epoch"][-1]
                peaks[name] = max(summary["peak_memory_bytes_per_rank"])
                row = {"P": parts, "run": name, "peak_bytes": peaks[name],
                       "peak_bytes_per_rank": summary["peak_memory_bytes_per_rank"],
                       "sequential_aggregation": last.get("sequential_aggregation")}
                report.append(row)
                print(f"P = {parts} {name:<17} largest rank's peak {peaks[name] / GIB:.2f} GiB", flush=True)
            if not {"one-shot, hybrid", "SAR"} <= set(peaks):
                continue
            hybrid = peaks["one-shot, hybrid"]
            print(f"P = {parts}: the hybrid one-shot exchange's received rows, at once {at_once / GIB:.2f} GiB "
                  f"({at_once / hybrid:.1%} of its peak), all layers {kept / GIB:.2f} GiB ({kept / hybrid:.1%}); "
                  f"SAR's peak {peaks['SAR'] / GIB:.2f} GiB, {1 - peaks['SAR'] / hybrid:.1%} below the hybrid "
                  f"one-shot's", flush=True)
            report.append({"P": parts, "hybrid_received_at_once_bytes": at_once,
                           "hybrid_received_all_layers_bytes": kept})
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
