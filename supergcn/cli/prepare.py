"""``supergcn prepare``: build the canonical graph directory of a dataset."""

from __future__ import annotations

import time
from pathlib import Path

HELP = "build the canonical graph directory of a dataset"


def configure(parser) -> None:
    from supergcn.data.datasets import dataset_names

    parser.epilog = f"Datasets: {', '.join(dataset_names())}."
    parser.add_argument("dataset", help="dataset name")
    parser.add_argument("--out", required=True, type=Path, help="output graph directory")
    parser.add_argument("--raw-root", type=Path, default=Path("data/raw"),
                        help="where original dataset files are (or are downloaded to); default data/raw")
    parser.add_argument("--seed", type=int, default=0, help="seed of generators and random splits")


def run(args) -> None:
    """Prepare ``args.dataset`` and write it to ``args.out`` (:func:`supergcn.data.graph.save_graph`)."""
    from supergcn.data.datasets import prepare_dataset
    from supergcn.data.graph import save_graph

    started = time.perf_counter()
    graph = prepare_dataset(args.dataset, raw_root=args.raw_root, seed=args.seed)
    meta = save_graph(graph, args.out, seconds=time.perf_counter() - started)
    print(f"prepared {meta['name']}: {meta['num_nodes']:,} nodes, {meta['num_edges_undirected']:,} undirected edges, "
          f"{meta['feature_dim']} features, {meta['num_classes']} classes, split {meta['split']} -> {args.out}")
