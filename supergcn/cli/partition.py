"""``supergcn partition``: METIS-partition a prepared graph."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir, positive_int
from supergcn.naming import PARTITION_CONSTRAINTS

HELP = "METIS-partition a prepared graph"


def configure(parser) -> None:
    parser.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    parser.add_argument("--parts", required=True, type=positive_int, help="number of parts P (MPI ranks)")
    parser.add_argument("--out", required=True, type=output_dir, help="output partition directory")
    parser.add_argument("--constraints", nargs="*", choices=PARTITION_CONSTRAINTS, default=list(PARTITION_CONSTRAINTS),
                        help="balanced vertex weights (combined into one, see supergcn/partition/metis.py)")
    parser.add_argument("--seed", type=int, default=0, help="METIS random seed")
    parser.add_argument("--edge-fraction", type=float, default=1.0,
                        help="METIS sees this seeded fraction of the edges, to bound its memory on huge graphs "
                             "(default 1: the whole graph)")


def run(args) -> None:
    """Partition ``args.graph`` into ``args.parts`` and write ``args.out``
    (:func:`supergcn.partition.metis.run_partition`)."""
    from supergcn.data.graph import load_graph, read_graph_meta
    from supergcn.partition.metis import run_partition

    meta = read_graph_meta(args.graph)
    graph = load_graph(args.graph, mmap=True)
    manifest = run_partition(graph, meta["hash"], args.parts, args.out, args.constraints, args.seed,
                             args.edge_fraction)
    balance = ", ".join(f"{name} {value['imbalance_max_over_mean']:.3f}" for name, value in manifest["balance"].items()
                        if value["imbalance_max_over_mean"] is not None)
    print(f"partitioned {graph.name} into {args.parts}: edge cut {manifest['edge_cut']:,} of "
          f"{manifest['num_edges_undirected']:,}; max/mean {balance}; {manifest['seconds']:.2f} s -> {args.out}")
