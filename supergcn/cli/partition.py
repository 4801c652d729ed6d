"""``supergcn partition``: partition a prepared graph with METIS or KaMinPar."""

from __future__ import annotations

import argparse
from pathlib import Path

from supergcn.cli._args import output_dir, positive_int
from supergcn.naming import PARTITION_CONSTRAINTS, PARTITION_ENGINES

HELP = "partition a prepared graph (METIS or KaMinPar)"


def configure(parser) -> None:
    parser.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    parser.add_argument("--parts", required=True, type=positive_int, help="number of parts P (MPI ranks)")
    parser.add_argument("--out", required=True, type=output_dir, help="output partition directory")
    parser.add_argument("--constraints", nargs="*", choices=PARTITION_CONSTRAINTS, default=list(PARTITION_CONSTRAINTS),
                        help="balanced vertex weights (each on its own with METIS, combined into one with "
                             "KaMinPar or --no-separate-constraints; see supergcn/partition/partition.py)")
    parser.add_argument("--seed", type=int, default=0, help="the partitioner's random seed")
    parser.add_argument("--engine", choices=PARTITION_ENGINES, default="metis",
                        help="metis (one thread, the reference) or kaminpar (threaded, a few bytes per edge)")
    parser.add_argument("--threads", type=positive_int, default=1, help="KaMinPar's threads")
    parser.add_argument("--separate-constraints", action=argparse.BooleanOptionalAction, default=None,
                        help="balance each constraint on its own (METIS's default, through the METIS library of the "
                             "cmeel-metis wheel) or, with --no-separate-constraints, one combined weight (KaMinPar's "
                             "only way)")
    parser.add_argument("--kaminpar-preset", default="terapart", help="KaMinPar preset up to 1,024 parts")
    parser.add_argument("--kaminpar-large-k-preset", default="terapart-largek",
                        help="KaMinPar preset beyond 1,024 parts")
    parser.add_argument("--edge-fraction", type=float, default=1.0,
                        help="METIS sees this seeded fraction of the edges, to bound its memory on huge graphs "
                             "(default 1: the whole graph)")


def run(args) -> None:
    """Partition ``args.graph`` into ``args.parts`` and write ``args.out``
    (:func:`supergcn.partition.store.run_partition`)."""
    from supergcn.data.graph import load_graph, read_graph_meta
    from supergcn.partition.store import Engine, run_partition

    meta = read_graph_meta(args.graph)
    graph = load_graph(args.graph, mmap=True)
    engine = Engine(args.engine, args.threads, args.kaminpar_preset, args.kaminpar_large_k_preset,
                    args.separate_constraints)
    manifest = run_partition(graph, meta["hash"], args.parts, args.out, args.constraints, args.seed,
                             args.edge_fraction, engine)
    balance = ", ".join(f"{name} {value['imbalance_max_over_mean']:.3f}" for name, value in manifest["balance"].items()
                        if value["imbalance_max_over_mean"] is not None)
    print(f"partitioned {graph.name} into {args.parts}: edge cut {manifest['edge_cut']:,} of "
          f"{manifest['num_edges_undirected']:,}; max/mean {balance}; {manifest['seconds']:.2f} s -> {args.out}")
