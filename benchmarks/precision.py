"""bfloat16 against float32 (``--precision``): test accuracy, and what ``auto`` may pick.

    .venv/bin/python benchmarks/precision.py accuracy [--datasets cora citeseer facebook] [--parts 1 4]
        [--seeds 5] [--epochs 200 facebook=30] [--threads 1] [--variants ...] [--precisions fp32 bf16]
        [--out precision-accuracy.json]
    .venv/bin/python benchmarks/precision.py summary RUNS.jsonl [RUNS.jsonl ...]

``accuracy`` prepares each graph (from ``../shared/datasets``), its METIS partition and
hybrid plan at each P, then, at each P, starts one MPI job of P ranks that trains every
run one after another in the same processes (no start-up per run): GraphSAGE, GCN and GAT
(float32 exchanges, no label propagation) and the hybrid Int2 + label propagation variant
(GraphSAGE, ``--bits 2``, label rate 0.62), each in fp32 and in bf16, at each seed, every
other option at the paper's Table 2 defaults (``--threads`` per rank, one by default;
``--epochs`` takes a count for every graph and ``name=count`` for one). It prints, per graph, P and variant, the
test accuracy at the best-validation epoch (mean ± sd over seeds) in both precisions and
bf16's loss in points (fp32 - bf16 of the means, with the standard error of the paired
per-seed differences: the same seed starts both from the same weights), and per variant whether bf16 stayed within
``ACCURACY_HELD`` points everywhere: the evidence behind each model card's
``bfloat16_auto``. ``summary`` prints the same from the runs files of one or more
``accuracy`` runs (``<out>.runs.jsonl``), with a Markdown table; where two files hold a run
of the same graph, P, variant, precision and seed, the later file's stands. So a change to
one precision's code of some variants reruns only those (``--variants``, ``--precisions``)
and is summarised with the earlier files first: the other runs are the same code.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from supergcn.data.datasets import prepare_dataset
from supergcn.data.graph import load_graph, save_graph
from supergcn.partition.store import load_partition, run_partition
from supergcn.plan.store import run_plan
from supergcn.train.precision import ACCURACY_HELD

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
#: The variants measured: name -> (model, options beside it).
VARIANTS = {"sage": ("sage", {}), "gcn": ("gcn", {}), "gat": ("gat", {}),
            "sage-int2-lp": ("sage", {"bits": 2, "label_rate": 0.62})}
PRECISIONS = ("fp32", "bf16")
#: The options that are paths.
PATHS = ("graph", "partition", "plan", "out")


def prepare(root: Path, dataset: str, parts: list[int]) -> None:
    """The graph, and its partition and hybrid plan at each P, under ``root/dataset``."""
    home = root / dataset
    meta = save_graph(prepare_dataset(dataset, SHARED), home / "g")
    graph = load_graph(home / "g")
    for p in parts:
        manifest = run_partition(graph, meta["hash"], p, home / f"p{p}")
        partition, _ = load_partition(home / f"p{p}", meta["hash"])
        run_plan(graph, meta["hash"], partition, manifest["partition_hash"], "hybrid", home / f"plan{p}")


def job(args) -> None:
    """Every run of ``--runs`` (a JSON list of option dicts) on this MPI job, one after
    another; rank 0 appends each run's result to ``--results``."""
    from mpi4py import MPI

    from supergcn.distributed.ranks import run_ranked
    from supergcn.train.config import TrainConfig
    from supergcn.train.metrics import read_metrics
    from supergcn.train.trainer import train

    comm = MPI.COMM_WORLD
    for options in json.loads(Path(args.runs).read_text()):
        label = options.pop("label")
        config = TrainConfig(**{key: Path(value) if key in PATHS else value for key, value in options.items()})
        status = run_ranked(lambda c, config=config: train(config, c), comm, "train", False)
        if status:
            sys.exit(status)
        if comm.Get_rank() == 0:
            header, _, summary = read_metrics(config.out)
            with open(args.results, "a") as results:
                results.write(json.dumps({**label, "picked": header["precision"]["picked"],
                                          "test_acc_at_best_val": summary["test_acc_at_best_val"]}) + "\n")
            print(f"{label}: {100 * summary['test_acc_at_best_val']:.1f} %", flush=True)


def accuracy(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results = Path(args.out).with_suffix(".runs.jsonl")
        results.unlink(missing_ok=True)
        for dataset in args.datasets:
            prepare(root, dataset, args.parts)
        for p in args.parts:
            runs = []
            for dataset in args.datasets:
                home = root / dataset
                for name in args.variants:
                    model, extra = VARIANTS[name]
                    for precision in args.precisions:
                        for seed in range(args.seeds):
                            runs.append({"label": {"dataset": dataset, "parts": p, "variant": name,
                                                   "precision": precision, "seed": seed},
                                         "graph": str(home / "g"), "partition": str(home / f"p{p}"),
                                         "plan": str(home / f"plan{p}"), "out": str(root / "m.jsonl"),
                                         "model": model, "precision": precision, "seed": seed,
                                         "epochs": epochs_of(args.epochs, dataset), "threads": args.threads,
                                         **extra})
            (root / "runs.json").write_text(json.dumps(runs))
            subprocess.run([str(Path(sys.executable).parent / "mpiexec"), "-n", str(p), sys.executable, __file__,
                            "job", "--runs", str(root / "runs.json"), "--results", str(results)], check=True)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    found = summarise(rows) if set(args.precisions) == set(PRECISIONS) else None
    if found is None:
        print(f"{results}: one precision only; compare it with `summary` and the other's runs files")
    else:
        print(json.dumps(found, indent=2))
    Path(args.out).write_text(json.dumps({"epochs": {d: epochs_of(args.epochs, d) for d in args.datasets},
                                          "seeds": args.seeds, "summary": found, "runs": rows}, indent=2))


def epochs_of(given: list[str], dataset: str) -> int:
    """The epochs ``dataset`` trains: its own ``name=count`` of ``given``, else the plain count."""
    own = dict(item.split("=", 1) for item in given if "=" in item)
    plain = [item for item in given if "=" not in item] or ["200"]
    return int(own.get(dataset, plain[-1]))


def summarise(rows: list[dict]) -> dict:
    """Per graph, P and variant: mean ± sd test accuracy (%) per precision and bf16's loss
    in points; per model, the largest loss and whether it stays within ``ACCURACY_HELD``."""
    table, worst = [], {}
    keys = sorted({(r["dataset"], r["parts"], r["variant"]) for r in rows})
    for dataset, parts, variant in keys:
        accuracy = {precision: [100 * r["test_acc_at_best_val"] for r in rows
                                if (r["dataset"], r["parts"], r["variant"], r["precision"]) ==
                                (dataset, parts, variant, precision)] for precision in PRECISIONS}
        loss = float(np.mean(accuracy["fp32"]) - np.mean(accuracy["bf16"]))
        # Paired by seed (the same initial weights): the spread of the loss itself.
        paired = np.array(accuracy["fp32"]) - np.array(accuracy["bf16"])
        error = float(np.std(paired, ddof=1) / np.sqrt(len(paired))) if len(paired) > 1 else float("nan")
        table.append({"dataset": dataset, "parts": parts, "variant": variant, "loss_points": round(loss, 2),
                      "loss_standard_error": round(error, 2),
                      **{precision: f"{np.mean(v):.2f} ± {np.std(v, ddof=1):.2f}"
                         for precision, v in accuracy.items()}})
        worst[variant] = max(worst.get(variant, -np.inf), loss)
    return {"rows": table, "largest_loss_points": {v: round(w, 2) for v, w in worst.items()},
            "held_within": ACCURACY_HELD,
            "held": {v: bool(w <= ACCURACY_HELD) for v, w in worst.items()}}


def merged_runs(paths: list[str]) -> list[dict]:
    """The runs of ``paths``' runs files, a later file's run replacing an earlier one of the
    same graph, P, variant, precision and seed."""
    runs = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            run = json.loads(line)
            runs[tuple(run[key] for key in ("dataset", "parts", "variant", "precision", "seed"))] = run
    return list(runs.values())


def summary(args) -> None:
    found = summarise(merged_runs(args.runs))
    print(json.dumps(found, indent=2))
    print("\n| graph | P | variant | fp32 (%) | bf16 (%) | bf16's loss (points, ± its standard error) |\n"
          "|---|---|---|---|---|---|")
    for row in found["rows"]:
        print(f"| {row['dataset']} | {row['parts']} | {row['variant']} | {row['fp32']} | {row['bf16']} | "
              f"{row['loss_points']:+.2f} ± {row['loss_standard_error']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    acc = commands.add_parser("accuracy")
    acc.add_argument("--datasets", nargs="+", default=["cora", "citeseer", "facebook"])
    acc.add_argument("--parts", type=int, nargs="+", default=[1, 4])
    acc.add_argument("--seeds", type=int, default=5)
    acc.add_argument("--epochs", nargs="+", default=["200"], help="N, and/or dataset=N")
    acc.add_argument("--threads", type=int, default=1, help="threads per rank")
    acc.add_argument("--variants", nargs="+", choices=tuple(VARIANTS), default=list(VARIANTS))
    acc.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    acc.add_argument("--out", default="precision-accuracy.json")
    acc.set_defaults(func=accuracy)
    table = commands.add_parser("summary")
    table.add_argument("runs", nargs="+", help="runs files of accuracy runs (a later file's run of the same key "
                                               "replaces an earlier one's)")
    table.set_defaults(func=summary)
    runner = commands.add_parser("job", help="(internal) the MPI job of one P")
    runner.add_argument("--runs", required=True)
    runner.add_argument("--results", required=True)
    runner.set_defaults(func=job)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
