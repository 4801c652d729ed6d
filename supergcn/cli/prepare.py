"""``supergcn prepare``: build the canonical graph directory of a dataset, built-in or your own."""

from __future__ import annotations

import time
from pathlib import Path

from supergcn.cli._args import output_dir
from supergcn.naming import KEEP_SELF_LOOPS, SELF_LOOPS

#: Where a built-in dataset's original files are, unless --raw-root says.
DEFAULT_RAW_ROOT = Path("data/raw")

HELP = "build the canonical graph directory of a dataset, built-in or your own"


def configure(parser) -> None:
    from supergcn.data.datasets import dataset_names
    from supergcn.data.own_files import GraphFiles
    from supergcn.options import declared

    parser.epilog = (f"Datasets: {', '.join(dataset_names())}. Or your own graph from NumPy files: --name and "
                     "its files instead of DATASET (docs/own-graph.md).")
    parser.add_argument("dataset", nargs="?", help="a built-in dataset's name (below); left out for your own graph")
    parser.add_argument("--out", required=True, type=output_dir, help="output graph directory")
    parser.add_argument("--raw-root", type=Path,
                        help=f"where a built-in dataset's original files are (or are downloaded to); default "
                             f"{DEFAULT_RAW_ROOT}")
    parser.add_argument("--seed", type=int, default=0, help="seed of generators and random splits")
    parser.add_argument("--self-loops", choices=SELF_LOOPS, default=KEEP_SELF_LOOPS,
                        help="keep self loops (once) or drop them, as upstream SuperGCN's preprocessing does; "
                             "recorded in the graph manifest")
    parser.add_argument("--accept-source-changes", action="store_true",
                        help="read a built-in dataset's raw files or counts that differ from what its source "
                             "published (a deliberate local variant, recorded in the graph manifest); refused "
                             "by default, naming the file")
    parser.add_argument("--allow-nonfinite-features", action="store_true",
                        help="keep feature values that are NaN or infinite (refused by default; counted in the graph "
                             "manifest): training then stops at its first epoch, its loss NaN")
    own = parser.add_argument_group("your own graph, from NumPy .npy or .npz files (instead of DATASET)")
    own.add_argument("--name", help="its name (letters, digits, - and _; no built-in dataset's), as the later "
                                    "steps and the tables show it")
    for field, spec in declared(GraphFiles):
        own.add_argument(f"--{field.name}", metavar="FILE",
                         help=spec["help"] + ("; required" if spec["required"] else ""))


def run(args) -> None:
    """Prepare ``args.dataset`` (or your own graph, ``args.name`` from its files) and write
    it to ``args.out`` (:func:`supergcn.data.graph.save_graph`)."""
    from supergcn.data.graph import GRAPH_MANIFEST, save_graph, with_self_loop_policy
    from supergcn.data.storage import check_replaceable

    check_replaceable(args.out, GRAPH_MANIFEST)  # before the work, not after it
    started = time.perf_counter()
    graph = with_self_loop_policy(_graph(args), args.self_loops)
    meta = save_graph(graph, args.out, seconds=time.perf_counter() - started,
                      allow_nonfinite_features=args.allow_nonfinite_features)
    print(f"prepared {meta['name']}: {meta['num_nodes']:,} nodes, {meta['num_edges_undirected']:,} undirected edges, "
          f"{meta['feature_dim']} features, {meta['num_classes']} classes, split {meta['split']} -> {args.out}")


def _graph(args):
    """The graph the arguments name: a built-in dataset, or your own (the two are exclusive)."""
    from supergcn.data.datasets import prepare_dataset, prepare_own_dataset
    from supergcn.data.own_files import GraphFiles, file_roles
    from supergcn.errors import SuperGCNError

    files = {role: getattr(args, role) for role in file_roles() if getattr(args, role) is not None}
    own = [f"--{flag}" for flag in ("name", *files) if getattr(args, flag) is not None]
    if args.dataset is not None and own:
        raise SuperGCNError(f"{args.dataset!r} names a built-in dataset and {', '.join(own)} your own graph",
                            "give one: the dataset's name, or --name and your graph's files (docs/own-graph.md)")
    if args.dataset is not None:
        return prepare_dataset(args.dataset, raw_root=args.raw_root or DEFAULT_RAW_ROOT, seed=args.seed,
                               accept_source_changes=args.accept_source_changes)
    if args.name is None:
        given = f"{', '.join(own)} without --name" if own else "no dataset"
        raise SuperGCNError(f"{given}: nothing to prepare", "name a built-in dataset (`supergcn prepare --help` "
                            "lists them), or give --name and your own graph's files (docs/own-graph.md)")
    if args.raw_root is not None or args.accept_source_changes:  # a graph of your own is read from its files alone
        flag = "--raw-root" if args.raw_root is not None else "--accept-source-changes"
        raise SuperGCNError(f"{flag} is for a built-in dataset's original files, not your own graph's",
                            "leave it out: --edges, --features, --labels and --split name your files")
    return prepare_own_dataset(args.name, GraphFiles(**files), seed=args.seed)
