"""GAT's communication volume under each strategy, with the cover weighted by its row costs.

    .venv/bin/python benchmarks/models.py volume [--datasets synthetic-arxiv synthetic-products]
        [--parts 16 64] [--hidden 256] [--heads 4] [--num-layers 3] [--workdir DIR]

For each graph and P (METIS, the pipeline's default partition): the bytes one GAT training
epoch sends (forward and backward: rows, attention scalars, destination scores;
:mod:`supergcn.plan.costs`, which a training epoch matches to the byte) under pre, post,
hybrid with the fewest rows (the SAGE plan) and hybrid with the cover weighted by GAT's
row costs, in FP32 and Int2; the reduction of the weighted hybrid over post (what the
peers send: every boundary source's projection), and the pairs on which it sends more than
pre or post (none, since the weighted cover is a cheapest one). ``--workdir`` keeps the
prepared graphs and partitions for a rerun.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from supergcn.data.datasets import prepare_dataset
from supergcn.data.graph import load_graph, save_graph
from supergcn.partition.store import load_partition, run_partition
from supergcn.plan.builder import plan_ranks
from supergcn.plan.costs import row_costs


def prepared(dataset: str, workdir: Path):
    """The graph of ``dataset`` in ``workdir`` (prepared there once)."""
    directory = workdir / dataset
    if not (directory / "meta.json").exists():
        save_graph(prepare_dataset(dataset), directory)
    return load_graph(directory, mmap=True)


def partitioned(graph, workdir: Path, parts: int):
    directory = workdir / f"{graph.name}-P{parts}"
    meta = json.loads((workdir / graph.name / "meta.json").read_text())
    if not (directory / "partition.json").exists():
        run_partition(graph, meta["hash"], parts, directory)
    return load_partition(directory, meta["hash"], meta["num_nodes"])[0]


def pair_rows(graph, partition, costs) -> dict[str, np.ndarray]:
    """Per pair: the PRE and POST rows of the hybrid plan under ``costs`` (None: fewest
    rows), and the distinct sources and destinations (post's and pre's rows)."""
    with tempfile.TemporaryDirectory(prefix="supergcn-volume-") as scratch:
        pairs_path = Path(scratch) / "pairs.npz"
        plan_ranks(graph, partition, "hybrid", scratch, lambda plan: None, pairs_path, costs)
        with np.load(pairs_path) as pairs:
            return {name: pairs[name].astype(np.int64) for name in pairs.files}


def volume(args) -> list[dict]:
    records = []
    with tempfile.TemporaryDirectory(prefix="supergcn-models-") as temporary:
        workdir = Path(args.workdir or temporary)
        workdir.mkdir(parents=True, exist_ok=True)
        for dataset in args.datasets:
            graph = prepared(dataset, workdir)
            for parts in args.parts:
                partition = partitioned(graph, workdir, parts)
                fewest = pair_rows(graph, partition, None)
                for bits in (32, 2):
                    pre_cost, post_cost = row_costs("gat", args.num_layers, args.hidden, args.heads,
                                                    graph.num_classes, bits)
                    weighted = pair_rows(graph, partition, (pre_cost, post_cost))
                    per_pair = {
                        "pre": pre_cost * fewest["distinct_destinations"],
                        "post": post_cost * fewest["distinct_sources"],
                        "hybrid_fewest_rows": pre_cost * fewest["pre_rows"] + post_cost * fewest["post_rows"],
                        "hybrid_weighted": pre_cost * weighted["pre_rows"] + post_cost * weighted["post_rows"],
                    }
                    megabytes = {name: int(bits_.sum()) / 8 / 2**20 for name, bits_ in per_pair.items()}
                    worse = int(np.count_nonzero(per_pair["hybrid_weighted"]
                                                 > np.minimum(per_pair["pre"], per_pair["post"])))
                    record = {"dataset": dataset, "P": parts, "bits": bits, "pre_row_bits": pre_cost,
                              "post_row_bits": post_cost, **{f"{k}_MiB": round(v, 2) for k, v in megabytes.items()},
                              "weighted_over_post": round(megabytes["hybrid_weighted"] / megabytes["post"], 4),
                              "weighted_over_fewest_rows": round(megabytes["hybrid_weighted"]
                                                                 / megabytes["hybrid_fewest_rows"], 4),
                              "pairs": len(fewest["src"]), "pairs_worse_than_pre_or_post": worse}
                    records.append(record)
                    print(json.dumps(record), flush=True)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    sub = commands.add_parser("volume", help="GAT's bytes per epoch under each strategy and cover")
    sub.add_argument("--datasets", nargs="+", default=["synthetic-arxiv", "synthetic-products"])
    sub.add_argument("--parts", nargs="+", type=int, default=[16, 64])
    sub.add_argument("--hidden", type=int, default=256)
    sub.add_argument("--heads", type=int, default=4)
    sub.add_argument("--num-layers", type=int, default=3)
    sub.add_argument("--workdir", type=Path, help="keep the prepared graphs and partitions here")
    args = parser.parse_args()
    records = volume(args)
    columns = ["dataset", "P", "bits", "pre_MiB", "post_MiB", "hybrid_fewest_rows_MiB", "hybrid_weighted_MiB",
               "weighted_over_post", "pairs_worse_than_pre_or_post"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for record in records:
        print("| " + " | ".join(str(record[c]) for c in columns) + " |")


if __name__ == "__main__":
    main()
