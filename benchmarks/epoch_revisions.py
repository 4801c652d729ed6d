"""This checkout's training epoch against another checkout's: ``supergcn train`` of each, in
turn, on the same steps.

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/epoch_revisions.py --other /tmp/before [--dataset synthetic-arxiv] [--ranks 1]

A change that should cost nothing at run time (a refactoring of the code around the epoch)
is held to the epoch it had. Each round runs one ``supergcn train`` of each checkout (its
package first on ``PYTHONPATH``), on steps prepared once by this checkout, the order of the
two swapped every round; runs on a shared machine drift by about 10 % from one to the next
(benchmarks/revisions.py), so the rounds interleave and the medians are compared. Printed:
the CPU, each run's mean epoch (each process's first excluded), each checkout's median and
their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from supergcn.bench.harness import say_if_oversubscribed
from supergcn.kernels.simd import cpu_model
from supergcn.train.metrics import read_metrics

REPO = Path(__file__).resolve().parents[1]


def prepare(dataset: str, ranks: int, root: Path) -> Path:
    """The dataset prepared, partitioned into ``ranks`` and planned (hybrid) under ``root``."""
    cli = [sys.executable, "-m", "supergcn.cli"]
    steps = [["prepare", dataset, "--out", root / "graph"],
             ["partition", "--graph", root / "graph", "--parts", ranks, "--out", root / "partition"],
             ["plan", "--graph", root / "graph", "--partition", root / "partition", "--strategy", "hybrid",
              "--out", root / "plan"]]
    for step in steps:
        subprocess.run([*cli, *map(str, step)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return root


def epoch_seconds(checkout: Path, root: Path, ranks: int, epochs: int, threads: int, out: Path) -> float:
    """One ``supergcn train`` of ``checkout``: its mean epoch, each process's first excluded."""
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    mpiexec = Path(sys.executable).parent / "mpiexec"
    subprocess.run([str(mpiexec), "-n", str(ranks), sys.executable, "-m", "supergcn.cli", "train",
                    "--graph", root / "graph", "--partition", root / "partition", "--plan", root / "plan",
                    "--out", out, "--epochs", str(epochs), "--threads", str(threads)],
                   check=True, cwd=checkout, env=environment, stdout=subprocess.DEVNULL)
    _, _, summary = read_metrics(out)
    return summary["mean_epoch_seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other", type=Path, required=True, help="the other checkout (a git worktree)")
    parser.add_argument("--dataset", default="synthetic-arxiv")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    say_if_oversubscribed(args.ranks, args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        root = prepare(args.dataset, args.ranks, Path(scratch))
        checkouts = {"this": REPO, "other": args.other.resolve()}
        seconds = {name: [] for name in checkouts}
        for round_ in range(args.rounds):
            order = list(checkouts) if round_ % 2 == 0 else list(reversed(checkouts))
            for name in order:
                seconds[name].append(epoch_seconds(checkouts[name], root, args.ranks, args.epochs, args.threads,
                                                   root / f"{name}{round_}.jsonl"))
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print(json.dumps({"cpu": cpu_model(), "dataset": args.dataset, "ranks": args.ranks, "threads": args.threads,
                      "epochs_per_run": args.epochs, "seconds": seconds, "median": medians,
                      "this_over_other": medians["this"] / medians["other"]}, indent=2))


if __name__ == "__main__":
    main()
