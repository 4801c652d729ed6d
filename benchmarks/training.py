"""Training benchmarks: accuracy against the PyG reference, and epoch time.

    .venv/bin/python benchmarks/training.py accuracy [--dataset cora] [--seeds 5] [--parts 1 2 4]
    .venv/bin/python benchmarks/training.py epoch-time [--dataset synthetic-arxiv] [--epochs 10]

``accuracy`` trains the paper's GraphSAGE (3 layers, hidden 256, LayerNorm, dropout 0.5,
Adam lr 0.01, 200 epochs) single-process with PyG and with ``supergcn train`` under
mpiexec at each P, from the same initial weights per seed, and prints the test accuracy
at the best-validation epoch (mean ± std over seeds).

``epoch-time`` times the same model on one graph: PyG single-process with T threads, and
``supergcn train`` at P = 1 with T threads and at each P > 1 with one thread per rank
(oversubscribed where P exceeds the cores); breakdown from the metrics file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from supergcn.data.datasets import prepare_dataset
from supergcn.data.graph import load_graph, save_graph
from supergcn.partition.metis import load_partition, run_partition
from supergcn.partition.plan import run_plan
from supergcn.train.gnn import GNN
from supergcn.train.reference import PyGModel, copy_weights, train_baseline

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
PHASES = ("aggregation", "communication", "quantization", "synchronization", "other", "total")


def prepare(root: Path, dataset: str, parts: list[int], strategy: str):
    graph = prepare_dataset(dataset, SHARED)
    meta = save_graph(graph, root / "g")
    graph = load_graph(root / "g")
    for p in parts:
        manifest = run_partition(graph, meta["hash"], p, root / f"p{p}")
        partition, _ = load_partition(root / f"p{p}", meta["hash"])
        run_plan(graph, meta["hash"], partition, manifest["partition_hash"], strategy, root / f"plan{p}")
    return graph


def run_supergcn(root: Path, parts: int, threads: int, out: Path, *extra) -> list[dict]:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    command = [str(mpiexec), "-n", str(parts), sys.executable, "-m", "supergcn.cli", "train", "--graph",
               str(root / "g"), "--partition", str(root / f"p{parts}"), "--plan", str(root / f"plan{parts}"),
               "--out", str(out), "--threads", str(threads), *map(str, extra)]
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    return [json.loads(line) for line in out.read_text().splitlines()]


def accuracy(args) -> None:
    rows = {"pyg": []} | {f"P={p}": [] for p in args.parts}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        graph = prepare(root, args.dataset, args.parts, args.strategy)
        for seed in range(args.seeds):
            torch.manual_seed(seed)
            ours = GNN("sage", graph.features.shape[1], 256, graph.num_classes)
            torch.save(ours.state_dict(), root / "init.pt")
            pyg = PyGModel("sage", graph.features.shape[1], 256, graph.num_classes)
            copy_weights(ours, pyg)
            torch.manual_seed(seed)
            rows["pyg"].append(train_baseline(graph, pyg, args.epochs, 0.01)["test_acc_at_best_val"])
            for p in args.parts:
                records = run_supergcn(root, p, 1, root / "m.jsonl", "--epochs", args.epochs, "--seed", seed,
                                       "--init-weights", root / "init.pt")
                rows[f"P={p}"].append(records[-1]["test_acc_at_best_val"])
    report = {name: {"mean": 100 * float(np.mean(v)), "std": 100 * float(np.std(v)), "runs": v}
              for name, v in rows.items()}
    print(json.dumps({"dataset": args.dataset, "strategy": args.strategy, "epochs": args.epochs,
                      "test_acc_at_best_val_percent": report}, indent=2))


def epoch_time(args) -> None:
    report = {"dataset": args.dataset, "epochs": args.epochs, "threads": args.threads, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        graph = prepare(root, args.dataset, [1, *args.parts], args.strategy)
        torch.set_num_threads(args.threads)
        torch.manual_seed(0)
        pyg = PyGModel("sage", graph.features.shape[1], 256, graph.num_classes)
        seconds = train_baseline(graph, pyg, args.epochs, 0.01)["seconds"]
        report["runs"]["pyg"] = {"epoch_seconds": float(np.mean(seconds[1:]))}
        for parts in [1, *args.parts]:
            threads = args.threads if parts == 1 else 1
            records = run_supergcn(root, parts, threads, root / "m.jsonl", "--epochs", args.epochs)
            epochs = [r for r in records if r["type"] == "epoch"][1:]
            breakdown = {k: float(np.mean([e["seconds"]["max"][k] for e in epochs])) for k in PHASES}
            report["runs"][f"P={parts}"] = {"threads_per_rank": threads, "epoch_seconds": breakdown["total"],
                                            "breakdown_max_over_ranks": breakdown,
                                            "speedup_vs_pyg": report["runs"]["pyg"]["epoch_seconds"]
                                            / breakdown["total"]}
    print(json.dumps(report, indent=2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    acc = commands.add_parser("accuracy")
    acc.add_argument("--dataset", default="cora")
    acc.add_argument("--seeds", type=int, default=5)
    acc.add_argument("--parts", type=int, nargs="+", default=[1, 2, 4])
    acc.add_argument("--epochs", type=int, default=200)
    acc.add_argument("--strategy", default="hybrid")
    acc.set_defaults(func=accuracy)
    timing = commands.add_parser("epoch-time")
    timing.add_argument("--dataset", default="synthetic-arxiv")
    timing.add_argument("--parts", type=int, nargs="+", default=[2, 4])
    timing.add_argument("--epochs", type=int, default=10)
    timing.add_argument("--threads", type=int, default=2)
    timing.add_argument("--strategy", default="hybrid")
    timing.set_defaults(func=epoch_time)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
