"""Foundation benchmark: preprocessing time and memory at scale, and the vertex-cover speed-up.

    .venv/bin/python benchmarks/foundation.py [--dataset synthetic-arxiv] [--parts 64 ...]
        [--scale 0.125] [--edge-fraction 1] [--workdir DIR] [--graph DIR] [--pairs 40]
        [--engines metis kaminpar] [--threads 2] [--metis-max-parts 1024]

Prints one JSON document: per step (prepare, then partition with each engine and hybrid
plan for each P) the seconds, the peak resident memory of that step alone and that peak
per directed adjacency entry, the edge cut, the rows pre / post / hybrid send and the
balance of each constraint, and the cover computation of the largest rank pairs timed
against networkx on exactly the same bipartite graphs (``--pairs 0`` skips it). Last, a
table of the same figures, one line per step.

Each step runs in a fresh spawned process that reports its own peak (``VmHWM``: Linux's
``ru_maxrss`` would carry this process's peak into the child), so one step's peak is not
hidden behind an earlier one's, and the figures match what the
pipeline's rules (one process per step) need. Outputs go to a temporary directory, or
to ``--workdir`` to keep them; ``--graph`` reuses a prepared graph instead of preparing.
``--scale`` shrinks a synthetic preset's nodes and edges by the same factor, to iterate
on a smaller graph of the same shape.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp

from supergcn.data.graph import load_graph, read_graph_meta
from supergcn.naming import PARTITION_ENGINES
from supergcn.partition.store import Engine, load_partition
from supergcn.perf.steps import in_child, in_workdir, partition_step, plan_step, prepare_step
from supergcn.plan.builder import rank_edges
from supergcn.plan.cover import minimum_vertex_cover


def pair_biadjacencies(graph, partition, count):
    """Biadjacency matrices of the ``count`` rank pairs with the most cut edges."""
    owner = np.repeat(np.arange(partition.num_parts), partition.sizes)
    old_to_new, new_to_old = partition.old_to_new, partition.new_to_old
    srcs, dsts = [], []
    for rank in range(partition.num_parts):
        local_dst, src = rank_edges(graph, partition, rank, old_to_new, new_to_old)
        cut = owner[src] != rank
        srcs.append(src[cut])
        dsts.append(local_dst[cut] + partition.offsets[rank])
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    pair = owner[src] * partition.num_parts + owner[dst]
    largest = np.argsort(np.bincount(pair))[::-1][:count]
    matrices = []
    for p in largest:
        u, v = src[pair == p], dst[pair == p]
        _, left = np.unique(u, return_inverse=True)
        _, right = np.unique(v, return_inverse=True)
        matrices.append(sp.csr_matrix((np.ones(len(u)), (left, right)), shape=(left.max() + 1, right.max() + 1)))
    return matrices


def networkx_graph(b):
    g = nx.Graph()
    top = [("L", i) for i in range(b.shape[0])]
    g.add_nodes_from(top)
    g.add_nodes_from(("R", j) for j in range(b.shape[1]))
    rows, cols = b.nonzero()
    g.add_edges_from((("L", int(i)), ("R", int(j))) for i, j in zip(rows, cols))
    return g, top


def networkx_cover_size(g, top):
    matching = nx.bipartite.hopcroft_karp_matching(g, top_nodes=top)
    return len(nx.bipartite.to_vertex_cover(g, matching, top_nodes=top))


def cover_comparison(graph_dir: Path, partition_dir: Path, pairs: int) -> dict:
    graph = load_graph(graph_dir, mmap=True)
    partition, _ = load_partition(partition_dir)
    matrices = pair_biadjacencies(graph, partition, pairs)
    union = sp.block_diag(matrices, format="csr")
    minimum_vertex_cover(union[:1])  # compile outside the timing
    started = time.perf_counter()
    ours = minimum_vertex_cover(union)
    ours_seconds = time.perf_counter() - started
    graphs = [networkx_graph(b) for b in matrices]  # built outside the timing, like ours
    started = time.perf_counter()
    oracle = sum(networkx_cover_size(g, top) for g, top in graphs)
    networkx_seconds = time.perf_counter() - started
    return {"pairs": len(matrices), "cut_edges": int(union.nnz), "cover_size": ours.size,
            "networkx_cover_size": oracle, "ours_seconds": ours_seconds,
            "networkx_seconds": networkx_seconds, "speedup": networkx_seconds / ours_seconds}


def run(args, workdir: Path) -> dict:
    report = {"dataset": args.dataset, "scale": args.scale, "edge_fraction": args.edge_fraction,
              "threads": args.threads, "steps": {}}
    graph_dir = args.graph or workdir / "graph"
    if args.graph is None:
        meta, report["steps"]["prepare"] = in_child(prepare_step, args.dataset, args.scale, graph_dir)
    else:
        meta = read_graph_meta(graph_dir)
    report.update(graph=str(graph_dir), num_nodes=meta["num_nodes"], num_edges_undirected=meta["num_edges_undirected"])
    report["num_edges_directed"] = meta["num_edges_directed"]
    report["parts"] = {}
    for parts in args.parts:
        for name in args.engines:
            if name == "metis" and parts > args.metis_max_parts:
                continue
            engine = Engine(name, threads=args.threads)
            partition_dir = workdir / f"partition-p{parts}-{name}"
            plan_dir = workdir / f"plan-p{parts}-{name}-hybrid"
            part_manifest, report["steps"][f"partition_p{parts}_{name}"] = in_child(
                partition_step, graph_dir, parts, partition_dir, args.edge_fraction, engine)
            plan_manifest, report["steps"][f"plan_hybrid_p{parts}_{name}"] = in_child(plan_step, graph_dir,
                                                                                      partition_dir, plan_dir)
            entry = {"engine": part_manifest["engine"], "edge_cut": part_manifest["edge_cut"],
                     "imbalance_max_over_mean": {k: v["imbalance_max_over_mean"]
                                                 for k, v in part_manifest["balance"].items()},
                     "partition_hash": part_manifest["partition_hash"],
                     "rows": {"pre": plan_manifest["rows_if_pre"], "post": plan_manifest["rows_if_post"],
                              "hybrid": plan_manifest["total_rows_sent"]}}
            if args.pairs:
                entry["cover"], _ = in_child(cover_comparison, graph_dir, partition_dir, args.pairs)
            report["parts"][f"{parts}-{name}"] = entry
            if name == "metis":
                shutil.rmtree(plan_dir)  # the largest outputs; the next P's steps need the disk
    for step in report["steps"].values():
        step["bytes_per_entry"] = round(step["peak_gib"] * 2**30 / meta["num_edges_directed"], 1)
    report["total_seconds"] = round(sum(step["seconds"] for step in report["steps"].values()), 2)
    return report


def summary(report: dict) -> str:
    """One line per step: seconds, peak GiB and bytes per entry; partitions add cut and rows."""
    lines = [f"{report['dataset']} x{report['scale']:g}: {report['num_edges_directed']:,} adjacency entries, "
             f"{report['threads']} threads",
             f"{'step':<30} {'seconds':>8} {'peak GiB':>9} {'B/entry':>8} {'edge cut':>12} {'hybrid rows':>12} "
             f"{'imbalance n/e/t':>16}"]
    for name, step in report["steps"].items():
        extra = ""
        if name.startswith("partition_"):
            entry = report["parts"][name.removeprefix("partition_p").replace("_", "-")]
            ratios = entry["imbalance_max_over_mean"].values()
            imbalance = "/".join(f"{v:.2f}" if v is not None else "-" for v in ratios)
            extra = f" {entry['edge_cut']:>12,} {entry['rows']['hybrid']:>12,} {imbalance:>16}"
        lines.append(f"{name:<30} {step['seconds']:>8.1f} {step['peak_gib']:>9.2f} {step['bytes_per_entry']:>8.1f}"
                     + extra)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="synthetic-arxiv")
    parser.add_argument("--parts", type=int, nargs="+", default=[64], help="one or more numbers of parts P")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="shrink a synthetic preset's nodes and edges by this factor")
    parser.add_argument("--edge-fraction", type=float, default=1.0,
                        help="the fraction of edges METIS sees (supergcn partition --edge-fraction)")
    parser.add_argument("--graph", type=Path, help="a prepared graph directory to reuse (skips prepare)")
    parser.add_argument("--workdir", type=Path, help="keep the outputs here instead of a temporary directory")
    parser.add_argument("--pairs", type=int, default=40, help="largest rank pairs timed against networkx (0: skip)")
    parser.add_argument("--engines", nargs="+", choices=PARTITION_ENGINES, default=["metis"],
                        help="partition engines to compare on the same graph")
    parser.add_argument("--threads", type=int, default=2, help="KaMinPar's threads")
    parser.add_argument("--metis-max-parts", type=int, default=1024,
                        help="skip METIS beyond this P (single-threaded, hours at k in the thousands)")
    report = in_workdir(parser.parse_args(), run)
    print(json.dumps(report, indent=2))
    print(summary(report))


if __name__ == "__main__":
    main()
