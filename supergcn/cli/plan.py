"""``supergcn plan``: build the per-rank communication plans of a partition."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir
from supergcn.naming import STRATEGIES

HELP = "build per-rank communication plans"


def configure(parser) -> None:
    parser.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    parser.add_argument("--partition", required=True, type=Path, help="partition directory of that graph")
    parser.add_argument("--strategy", required=True, choices=STRATEGIES, help="how cut edges are served")
    parser.add_argument("--out", required=True, type=output_dir, help="output plan directory")


def run(args) -> None:
    """Plan ``args.strategy`` for the partition and write ``args.out``
    (:func:`supergcn.plan.store.run_plan`); print the rows each strategy sends."""
    from supergcn.data.graph import load_graph, read_graph_meta
    from supergcn.partition.store import load_partition
    from supergcn.plan.statistics import strategy_summary
    from supergcn.plan.store import plan_strategy_rows, run_plan

    meta = read_graph_meta(args.graph)
    graph = load_graph(args.graph, mmap=True)
    partition, part_manifest = load_partition(args.partition, meta["hash"], meta["num_nodes"])
    manifest = run_plan(graph, meta["hash"], partition, part_manifest["partition_hash"], args.strategy, args.out)
    print(f"plan {args.strategy} for P={partition.num_parts} on {graph.name} ({manifest['seconds']:.2f} s) "
          f"-> {args.out}")
    print(strategy_summary(plan_strategy_rows(args.out)[1]))
