"""``supergcn prepare``: build the canonical graph directory of a dataset."""

from __future__ import annotations

import time
from pathlib import Path

from supergcn.cli._args import output_dir
from supergcn.naming import KEEP_SELF_LOOPS, SELF_LOOPS

HELP = "build the canonical graph directory of a dataset"


def configure(parser) -> None:
    from supergcn.data.datasets import dataset_names

    parser.epilog = f"Datasets: {', '.join(dataset_names())}."
    parser.add_argument("dataset", help="dataset name")
    parser.add_argument("--out", required=True, type=output_dir, help="output graph directory")
    parser.add_argument("--raw-root", type=Path, default=Path("data/raw"),
                        help="where original dataset files are (or are downloaded to); default data/raw")
    parser.add_argument("--seed", type=int, default=0, help="seed of generators and random splits")
    parser.add_argument("--self-loops", choices=SELF_LOOPS, default=KEEP_SELF_LOOPS,
                        help="keep self loops (once) or drop them, as upstream SuperGCN's preprocessing does; "
                             "recorded in the graph manifest")
    parser.add_argument("--allow-nonfinite-features", action="store_true",
                        help="keep feature values that are NaN or infinite (refused by default; counted in the graph "
                             "manifest): training then stops at its first epoch, its loss NaN")


def run(args) -> None:
    """Prepare ``args.dataset`` and write it to ``args.out`` (:func:`supergcn.data.graph.save_graph`)."""
    from supergcn.data.datasets import prepare_dataset
    from supergcn.data.graph import save_graph, with_self_loop_policy

    started = time.perf_counter()
    graph = with_self_loop_policy(prepare_dataset(args.dataset, raw_root=args.raw_root, seed=args.seed),
                                  args.self_loops)
    meta = save_graph(graph, args.out, seconds=time.perf_counter() - started,
                      allow_nonfinite_features=args.allow_nonfinite_features)
    print(f"prepared {meta['name']}: {meta['num_nodes']:,} nodes, {meta['num_edges_undirected']:,} undirected edges, "
          f"{meta['feature_dim']} features, {meta['num_classes']} classes, split {meta['split']} -> {args.out}")
