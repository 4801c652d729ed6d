"""``supergcn partition``: partition a prepared graph with METIS, KaMinPar or reverse Cuthill–McKee ranges.

Its options but the graph, P and the output are the fields of
:class:`supergcn.partition.config.PartitionConfig`, from which the command line is derived
(:func:`supergcn.options.add_arguments`).
"""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir, positive_int
from supergcn.options import add_arguments, values_given
from supergcn.partition.config import GROUPS, PartitionConfig

HELP = "partition a prepared graph (METIS, KaMinPar or reverse Cuthill–McKee ranges)"


def configure(parser) -> None:
    parser.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    parser.add_argument("--parts", required=True, type=positive_int, help="number of parts P (MPI ranks)")
    parser.add_argument("--out", required=True, type=output_dir, help="output partition directory")
    add_arguments(parser, PartitionConfig, groups=GROUPS)


def run(args) -> None:
    """Partition ``args.graph`` into ``args.parts`` and write ``args.out``
    (:func:`supergcn.partition.store.run_partition`)."""
    from supergcn.data.graph import load_graph, read_graph_meta
    from supergcn.data.storage import check_replaceable
    from supergcn.partition.store import PARTITION_MANIFEST, Engine, run_partition

    check_replaceable(args.out, PARTITION_MANIFEST)  # before the work, not after it
    options = PartitionConfig(**values_given(args, PartitionConfig))
    meta = read_graph_meta(args.graph)
    graph = load_graph(args.graph, mmap=True)
    manifest = run_partition(graph, meta["hash"], args.parts, args.out, options.constraints, options.seed,
                             options.edge_fraction, Engine.of(options))
    balance = ", ".join(f"{name} {value['imbalance_max_over_mean']:.3f}" for name, value in manifest["balance"].items()
                        if value["imbalance_max_over_mean"] is not None)
    print(f"partitioned {graph.name} into {args.parts}: edge cut {manifest['edge_cut']:,} of "
          f"{manifest['num_edges_undirected']:,}; max/mean {balance}; {manifest['seconds']:.2f} s -> {args.out}")
