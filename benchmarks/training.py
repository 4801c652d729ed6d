"""Training benchmarks: accuracy against the PyG reference, and epoch time.

    .venv/bin/python benchmarks/training.py accuracy [--dataset cora] [--seeds 5] [--parts 1 2 4]
    .venv/bin/python benchmarks/training.py epoch-time [--dataset synthetic-arxiv] [--epochs 10]
    .venv/bin/python benchmarks/training.py scaling [--parts 1 2 4 8 16] [--bits 32 2] [--models sage gat] [--epochs 5]
    .venv/bin/python benchmarks/training.py label-propagation [--datasets synthetic-arxiv facebook] [--repeats 3]
    .venv/bin/python benchmarks/training.py mask-label-reference --graph data/graphs/citeseer [--seeds 0 1 2]

``accuracy`` trains the paper's GraphSAGE (3 layers, hidden 256, LayerNorm, dropout 0.5,
Adam lr 0.01, 200 epochs) single-process with PyG and with ``supergcn train`` under
mpiexec at each P, from the same initial weights per seed, and prints the test accuracy
at the best-validation epoch (mean ± std over seeds).

``epoch-time`` times the same model on one graph, all in one run: PyG single-process with
T threads, in a child process under glibc's malloc and under the allocator training uses
(mimalloc from the project's dependencies; ``--allocators`` adds others), and under
bfloat16 autocast (the peer at its best on a CPU with bfloat16); the floors (the model's
dense layers alone in float32 and in bfloat16, as each runs them, the aggregation kernels alone,
their rooflines and their reads alone, on float32 and on bfloat16 rows, same threads); ``supergcn train``
at P = 1 with T threads under each allocator, with its breakdown and the CPU time per epoch, with
bfloat16 GEMMs, and with ``--precision bf16``, with what each bf16 target leaves beside the
bf16 dense floor against the bf16 gathers' reads alone (``bfloat16_budget``);
and at each P > 1 (one thread per rank, oversubscribed where P exceeds the cores) with
the exchange overlapped and not, for the share of communication the overlap hides. It
prints its targets as ratios against PyG with the same allocator.

``scaling`` prints the strong scaling of ``supergcn train`` on one node: the epoch time
(the first excluded, slowest rank) at each P with one thread per rank, for each model and
exchange precision, with the speed-up and efficiency over the smallest P, the phases, the
bytes sent and the peak memory per rank (numba's cache is filled by a one-epoch run
first). GAT's hybrid plans hold its weighted cover (float32 rows).

``label-propagation`` prints, per graph, the epoch time with masked label propagation
over the same variant's without (``supergcn train`` at each P, one thread per rank, FP32
and, at P > 1, Int2), and the same ratio for PyG's ``MaskLabel`` single-process, all in
one run (the target: at most 1.15). Each setting runs ``--repeats`` pairs (without
LP, then with) and reports the median pair's ratio and the range.

``mask-label-reference`` trains PyG's GraphSAGE without and with ``MaskLabel`` (label
rate 0.62, PyG's Bernoulli mask) on a graph the pipeline prepared (so on the study's
split), one process, per seed, and prints test accuracy at the best-validation epoch and
the first epoch (and training seconds) at which validation accuracy reaches shares of
the best any of these runs reaches: the reference for the label-propagation study.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from supergcn.bench.harness import say_if_oversubscribed, timed
from supergcn.data.datasets import prepare_dataset
from supergcn.data.graph import load_graph, save_graph
from supergcn.data.storage import peak_memory_mib
from supergcn.distributed.threads import set_threads
from supergcn.distributed.timing import BREAKDOWN, DETAIL
from supergcn.models import card, weighted_cover_models
from supergcn.partition.store import load_partition, run_partition
from supergcn.plan.costs import row_costs
from supergcn.plan.store import run_plan
from supergcn.testing.pyg import PyGModel, copy_weights, train_baseline
from supergcn.train.allocator import ALLOCATOR_ENV, allocator_in_use, relaunch_with_retaining_allocator
from supergcn.train.gnn import GNN
from supergcn.train.metrics import CPU_TIMES
from supergcn.train.precision import bfloat16_instructions

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def plan_name(parts: int, model: str = "sage") -> str:
    """The plan directory of P = ``parts`` that ``model`` trains on: a weighted cover's own
    (:func:`~supergcn.models.weighted_cover_models`, float32 rows, 3 layers) or the fewest rows'."""
    return f"plan{parts}-{model}" if model in weighted_cover_models() else f"plan{parts}"


def prepare(root: Path, dataset: str, parts: list[int], strategy: str, models=("sage",), hidden: int = 256,
            heads: int = 4):
    """The graph, its partition at each P and the plans ``models`` train on (:func:`plan_name`)."""
    graph = prepare_dataset(dataset, SHARED)
    meta = save_graph(graph, root / "g")
    graph = load_graph(root / "g")
    for p in parts:
        manifest = run_partition(graph, meta["hash"], p, root / f"p{p}")
        partition, _ = load_partition(root / f"p{p}", meta["hash"])
        for name in sorted({plan_name(p, model) for model in models}):
            model = name.partition("-")[2] or "sage"
            costs = row_costs(card(model), 3, hidden, heads, graph.num_classes) if strategy == "hybrid" else None
            run_plan(graph, meta["hash"], partition, manifest["partition_hash"], strategy, root / name, costs)
    return graph


def allocator_environment(allocator: str) -> dict:
    """This process's environment for a child that picks its allocator afresh: any
    ``SUPERGCN_ALLOCATOR`` value (``auto``, ``glibc``, ``mimalloc``, ``jemalloc``, a library's path)."""
    inherited = ("LD_PRELOAD", "MALLOC_CONF", "SUPERGCN_ALLOCATOR_RELAUNCHED", ALLOCATOR_ENV)
    return {**{k: v for k, v in os.environ.items() if k not in inherited and not k.startswith("MIMALLOC_")},
            ALLOCATOR_ENV: allocator}


def run_supergcn(root: Path, parts: int, threads: int, out: Path, *extra, allocator: str = "auto",
                 plan: str | None = None) -> list[dict]:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    plan_dir = root / (plan or plan_name(parts))
    command = [str(mpiexec), "-n", str(parts), sys.executable, "-m", "supergcn.cli", "train", "--graph",
               str(root / "g"), "--partition", str(root / f"p{parts}"), "--plan", str(plan_dir),
               "--out", str(out), "--threads", str(threads), *map(str, extra)]
    say_if_oversubscribed(parts, threads)
    subprocess.run(command, check=True, env={**allocator_environment(allocator), "OMP_NUM_THREADS": str(threads)})
    return [json.loads(line) for line in out.read_text().splitlines()]


def pyg_epoch_seconds(root: Path, epochs: int, threads: int, hidden: int, allocator: str,
                      label_rate: float = 0.0, autocast: bool = False) -> dict:
    """PyG's mean epoch (the first excluded) in a child process with ``allocator``; with
    ``autocast``, every epoch under ``torch.autocast("cpu", dtype=torch.bfloat16)``."""
    command = [sys.executable, __file__, "pyg-epoch", "--graph", str(root / "g"), "--epochs", str(epochs),
               "--threads", str(threads), "--hidden", str(hidden), "--label-rate", str(label_rate),
               *(["--bf16-autocast"] if autocast else [])]
    result = subprocess.run(command, check=True, capture_output=True, text=True,
                            env=allocator_environment(allocator))
    return json.loads(result.stdout)


def pyg_epoch(args) -> None:
    relaunch_with_retaining_allocator()
    graph = load_graph(args.graph)
    set_threads(args.threads)
    torch.manual_seed(0)
    pyg = PyGModel("sage", graph.features.shape[1], args.hidden, graph.num_classes,
                   label_propagation=args.label_rate > 0)
    # PyG at its best on a CPU with bfloat16: its GEMMs (and whatever else autocast lowers)
    # in bfloat16, as PyG users would run it, forward, backward and evaluation.
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16_autocast):
        seconds = train_baseline(graph, pyg, args.epochs, 0.01, label_rate=args.label_rate)["seconds"][1:]
    print(json.dumps({"epoch_seconds": float(np.mean(seconds)), "allocator": allocator_in_use()["name"],
                      "bf16_autocast": args.bf16_autocast, "peak_rss_gib": peak_memory_mib() / 1024}))


def accuracy(args) -> None:
    rows = {"pyg": []} | {f"P={p}": [] for p in args.parts}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        graph = prepare(root, args.dataset, args.parts, args.strategy)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            torch.manual_seed(seed)
            ours = GNN(args.model, graph.features.shape[1], 256, graph.num_classes, heads=args.heads)
            torch.save(ours.state_dict(), root / "init.pt")
            pyg = PyGModel(args.model, graph.features.shape[1], 256, graph.num_classes, heads=args.heads)
            copy_weights(ours, pyg)
            torch.manual_seed(seed)
            rows["pyg"].append(train_baseline(graph, pyg, args.epochs, args.lr)["test_acc_at_best_val"])
            for p in args.parts:
                records = run_supergcn(root, p, 1, root / "m.jsonl", "--epochs", args.epochs, "--seed", seed,
                                       "--init-weights", root / "init.pt", "--model", args.model,
                                       "--heads", args.heads, "--lr", args.lr)
                rows[f"P={p}"].append(records[-1]["test_acc_at_best_val"])
    report = {name: {"mean": 100 * float(np.mean(v)), "std": 100 * float(np.std(v)), "runs": v}
              for name, v in rows.items()}
    print(json.dumps({"dataset": args.dataset, "model": args.model, "strategy": args.strategy,
                      "epochs": args.epochs, "lr": args.lr,
                      "seeds": list(range(args.first_seed, args.first_seed + args.seeds)),
                      "test_acc_at_best_val_percent": report}, indent=2))


def layer_dims(graph, hidden: int, layers: int) -> list[tuple[int, int]]:
    dims = [graph.features.shape[1]] + [hidden] * (layers - 1) + [graph.num_classes]
    return list(zip(dims[:-1], dims[1:]))


def dense_floor(graph, hidden: int, layers: int, repeats: int, bfloat16: bool = False) -> float:
    """Seconds of the model's linear layers alone, forward and backward, on all N rows, as
    :class:`supergcn.models.sage.layer.Layer` runs them, with every weight gradient and the
    input gradients from layer 2 on (the input features need none), as in training.

    In float32, each layer's ``lin_neigh(h) + lin_self(h)``: one GEMM with bias, one
    accumulating GEMM. With ``bfloat16``, the one bfloat16 GEMM (from float32 weights) a bf16
    layer runs for both projections: ``[h' | h] [W_n | W_s]^T`` where it aggregates first,
    ``h [W_n; W_s]^T`` where it projects first, each fed its input in that layout (the
    concatenation's copy, the bias and the float32 sums are not GEMMs and are left out). PyG
    under autocast runs two GEMMs a layer, so this is a floor for it too."""
    n = graph.num_nodes
    torch.manual_seed(0)
    dims = layer_dims(graph, hidden, layers)
    if bfloat16:
        return timed(_concatenated_gemms(n, dims), repeats)[1]
    linears = [(torch.nn.Linear(a, b), torch.nn.Linear(a, b, bias=False)) for a, b in dims]
    x = torch.randn(n, graph.features.shape[1])

    def step():
        h = x  # needs no gradient, so autograd skips layer 1's input gradient, as in training
        for neigh, own in linears:
            h = torch.addmm(neigh(h), h, own.weight.t())  # the sum fused into the GEMM, as in training
        h.sum().backward()
    return timed(step, repeats)[1]


def _concatenated_gemms(n: int, dims: list[tuple[int, int]]):
    """The step of :func:`dense_floor`'s bfloat16 GEMMs: each layer's one GEMM on an input
    of its own (the first layer's without a gradient), backward from a given gradient."""
    sage = card("sage")
    layers = []
    for k, (a, b) in enumerate(dims):
        first = sage.layer_transforms_first(a, b)
        rows = torch.randn(n, a if first else 2 * a).bfloat16().requires_grad_(k > 0)
        weight = torch.nn.Parameter(torch.randn(2 * b, a) if first else torch.randn(b, 2 * a))
        layers.append((rows, weight, torch.ones(n, 2 * b if first else b, dtype=torch.bfloat16)))

    def step():
        for rows, weight, grad in layers:
            torch.nn.functional.linear(rows, weight.to(torch.bfloat16)).backward(grad)
    return step


def aggregation_floor(root: Path, graph, hidden: int, layers: int, threads: int, allocator: str = "auto",
                      rows: str = "float32") -> dict:
    """Seconds of the mean-aggregation kernels alone at the widths training aggregates,
    of their rooflines and of their reads alone (:mod:`supergcn.bench.roofline`: the pure
    gather reads the rows each product reads, in its order, and writes nothing; a kernel
    may overlap its writes with its reads, but must make those reads), from ``supergcn
    bench kernels`` (its own process, like a rank) with ``rows`` (``bfloat16``: as a
    ``--precision bf16`` rank gathers): forward at every layer (a layer narrowing its
    width transforms first, so it aggregates its output width), backward from layer 2 on
    (the input features need no gradient)."""
    total = {"kernels": 0.0, "roofline": 0.0, "reads": 0.0}
    for k, (a, b) in enumerate(layer_dims(graph, hidden, layers)):
        command = [sys.executable, "-m", "supergcn.cli", "bench", "kernels", "--graph", str(root / "g"),
                   "--features", str(b if b < a else a), "--threads", str(threads), "--no-pyg", "--rows", rows]
        report = json.loads(subprocess.run(command, check=True, capture_output=True, text=True,
                                           env=allocator_environment(allocator)).stdout)
        passes = 2 if k > 0 else 1  # the transpose reads as many rows as the product
        total["kernels"] += report["seconds"]["ours_forward"] + (report["seconds"]["ours_backward"] if k > 0 else 0.0)
        total["roofline"] += passes * report["roofline"]["seconds"]
        total["reads"] += passes * report["roofline"]["pure_gather_seconds"]
    return total


def bfloat16_budget(floors: dict, pyg_epoch: float, pyg_autocast: float) -> dict:
    """Per ``--precision bf16`` target, the longest epoch it allows, what that leaves beside
    the bfloat16 dense floor (the GEMMs alone) for everything else, and whether the bf16
    gathers' reads alone fit in it: where they do not, no implementation that runs the
    GEMMs at the floor and reads the gathered rows in this order meets the target."""
    dense, reads = floors["dense_bfloat16"], floors["aggregation_bfloat16"]["reads"]
    budget = {}
    for name, epoch in (("10x PyG float32", pyg_epoch / 10), ("8x PyG bf16 autocast", pyg_autocast / 8),
                        ("1.2x the bf16 dense floor", 1.2 * dense)):
        budget[name] = {"epoch_at_most": epoch, "left_beside_dense_floor": epoch - dense,
                        "bf16_gather_reads": reads, "gather_reads_alone_fit": reads <= epoch - dense}
    return budget


def measured_run(root, parts, threads, out, *extra, allocator="auto", plan=None) -> tuple[list[dict], dict]:
    """A training run's epochs (the first dropped), its wall, user and system seconds, the
    largest rank's peak resident memory and the allocator its ranks ran with."""
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    records = run_supergcn(root, parts, threads, out, *extra, allocator=allocator, plan=plan)
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - started
    summary = next(r for r in records if r["type"] == "summary")
    header = next(r for r in records if r["type"] == "header")
    usage = {"wall": wall, "user": after.ru_utime - before.ru_utime, "system": after.ru_stime - before.ru_stime,
             "peak_rss_gib": max(summary["peak_memory_bytes_per_rank"]) / 2**30,
             "allocator": header["allocator"]["name"]}
    return [r for r in records if r["type"] == "epoch"][1:], usage


def mean_phases(epochs: list[dict], view: str = "slowest_rank") -> dict:
    keys = [*DETAIL, *BREAKDOWN, *CPU_TIMES, "total"]
    return {k: float(np.mean([e["seconds"][view][k] for e in epochs])) for k in keys}


def allocator_table(runs: dict) -> list[dict]:
    """Per allocator the P = 1 run had: its steady epoch (the first excluded), the share of
    those epochs spent in the kernel, its peak RSS, and its ratio to PyG under the same
    allocator and under glibc (PyG as users run it)."""
    pyg_default = runs["pyg glibc"]["epoch_seconds"]
    rows = []
    for key, run in runs.items():
        allocator = key.removeprefix("P=1 ") if key.startswith("P=1 ") else "auto" if key == "P=1" else None
        if allocator is None or "phases" not in run:
            continue
        epoch, pyg = run["phases"]["total"], runs.get(f"pyg {allocator}", {})
        rows.append({"requested": allocator, "allocator": run["process_seconds"]["allocator"], "epoch_seconds": epoch,
                     "system_share_of_epoch": run["phases"]["cpu_system"] / epoch,
                     "peak_rss_gib": run["process_seconds"]["peak_rss_gib"],
                     "pyg_same_allocator_over_ours": pyg["epoch_seconds"] / epoch if pyg else None,
                     "pyg_glibc_over_ours": pyg_default / epoch})
    return rows


def epoch_time(args) -> None:
    relaunch_with_retaining_allocator()  # the floors are measured with the allocator training uses
    report = {"dataset": args.dataset, "epochs": args.epochs, "threads": args.threads, "hidden": args.hidden,
              "allocator": allocator_in_use(), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        graph = prepare(root, args.dataset, [1, *args.parts], args.strategy)
        set_threads(args.threads)
        for allocator in dict.fromkeys(["glibc", "auto", *args.allocators]):
            report["runs"][f"pyg {allocator}"] = pyg_epoch_seconds(root, args.epochs, args.threads, args.hidden,
                                                                   allocator)
        report["runs"]["pyg auto bf16 autocast"] = pyg_epoch_seconds(root, args.epochs, args.threads, args.hidden,
                                                                     "auto", autocast=True)
        pyg_epoch = report["runs"]["pyg auto"]["epoch_seconds"]  # the allocator our ranks get
        pyg_autocast = report["runs"]["pyg auto bf16 autocast"]["epoch_seconds"]
        dense = dense_floor(graph, args.hidden, 3, args.repeats)
        dense_bf16 = dense_floor(graph, args.hidden, 3, args.repeats, bfloat16=True)
        floors = {"dense": dense, "dense_bfloat16": dense_bf16,
                  **{f"aggregation_{rows}": aggregation_floor(root, graph, args.hidden, 3, args.threads, rows=rows)
                     for rows in ("float32", "bfloat16")}}
        report["floor_seconds"] = floors
        aggregation = floors["aggregation_float32"]["kernels"]
        common = ["--epochs", args.epochs, "--hidden", args.hidden]
        for allocator in [a for a in dict.fromkeys(["glibc", *args.allocators]) if a != "auto"]:
            epochs, usage = measured_run(root, 1, args.threads, root / "m.jsonl", *common, allocator=allocator)
            report["runs"][f"P=1 {allocator}"] = {"threads_per_rank": args.threads, "phases": mean_phases(epochs),
                                                  "process_seconds": usage}
        epochs, usage = measured_run(root, 1, args.threads, root / "m.jsonl", *common)
        phases = mean_phases(epochs)
        report["runs"]["P=1"] = {"threads_per_rank": args.threads, "phases": phases, "process_seconds": usage}
        report["allocators"] = allocator_table(report["runs"])
        report["targets"] = {
            "speedup_vs_pyg (>= 5)": pyg_epoch / phases["total"],
            "speedup_vs_pyg_bf16_autocast": pyg_autocast / phases["total"],
            "speedup_vs_pyg_under_glibc": report["runs"]["pyg glibc"]["epoch_seconds"] / phases["total"],
            "fp32_bound: pyg_over_dense_floor": pyg_epoch / dense,
            "system_share_of_epoch (<= 0.10)": phases["cpu_system"] / phases["total"],
            "system_share_of_process_wall": usage["system"] / usage["wall"],
            "other_over_dense_floor (<= 1.3)": phases["other"] / dense,
            "aggregation_over_kernels (<= 1.2)": phases["aggregation"] / aggregation,
            "epoch_over_floor": phases["total"] / (dense + aggregation + phases["communication"]),
        }
        # The two bfloat16 modes, each with its run's name and its targets' names.
        for flags, run, name, aims in ((("--dense-dtype", "bfloat16"), "P=1 bfloat16", "bfloat16 GEMMs", ("", "", "")),
                                       (("--precision", "bf16"), "P=1 --precision bf16", "--precision bf16",
                                        (" (>= 10)", " (>= 8)", " (<= 1.2)"))):
            epochs, usage = measured_run(root, 1, args.threads, root / "m.jsonl", *common, *flags)
            phases = mean_phases(epochs)
            report["runs"][run] = {"threads_per_rank": args.threads, "phases": phases,
                                   "process_seconds": usage, "bf16_cpu_flags": bfloat16_instructions()}
            report["targets"][f"speedup_vs_pyg with {name}{aims[0]}"] = pyg_epoch / phases["total"]
            report["targets"][f"speedup_vs_pyg_bf16_autocast with {name}{aims[1]}"] = pyg_autocast / phases["total"]
            report["targets"][f"{name}: epoch_over_bf16_dense_floor{aims[2]}"] = phases["total"] / dense_bf16
        report["targets"]["--precision bf16: aggregation_over_bf16_kernels"] = (
            phases["aggregation"] / floors["aggregation_bfloat16"]["kernels"])
        report["bfloat16_budget"] = bfloat16_budget(floors, pyg_epoch, pyg_autocast)
        fp32_epoch = report["runs"]["P=1"]["phases"]["total"]
        report["targets"]["--precision bf16 over fp32 epoch"] = phases["total"] / fp32_epoch
        for parts in args.parts:
            runs = {}
            for overlap in ("--overlap", "--no-overlap"):
                epochs, usage = measured_run(root, parts, 1, root / "m.jsonl", *common, overlap)
                runs[overlap] = {"phases": mean_phases(epochs), "process_seconds": usage}
            exposed = runs["--overlap"]["phases"]["communication"]
            whole = runs["--no-overlap"]["phases"]["communication"]
            report["runs"][f"P={parts}"] = {
                "threads_per_rank": 1, **runs,
                "hidden_share_of_communication": 1 - exposed / whole if whole else float("nan"),
                "local_aggregation_over_exchange": runs["--no-overlap"]["phases"]["aggregation"] / whole
                if whole else float("nan"),
                "speedup_vs_pyg": pyg_epoch / runs["--overlap"]["phases"]["total"]}
    print(json.dumps(report, indent=2))
    print(f"\nP = 1, {args.threads} threads, epochs after the first:")
    print(f"{'requested':>10} {'ran':>9} {'epoch s':>8} {'kernel':>7} {'peak GiB':>9} {'PyG same/ours':>14} "
          f"{'PyG glibc/ours':>15}")
    for row in report["allocators"]:
        same = row["pyg_same_allocator_over_ours"]
        print(f"{row['requested'][-10:]:>10} {row['allocator']:>9} {row['epoch_seconds']:8.2f} "
              f"{row['system_share_of_epoch']:7.1%} {row['peak_rss_gib']:9.2f} "
              f"{'' if same is None else f'{same:.2f}x':>14} {row['pyg_glibc_over_ours']:14.2f}x")
    bf16 = report["runs"]["P=1 --precision bf16"]["phases"]["total"]
    print(f"\n--precision bf16 (epoch {bf16:.3f} s) against its targets, seconds:")
    print(f"{'target':>26} {'epoch <=':>9} {'beside the dense floor':>23} {'bf16 gathers reads':>19}")
    for name, row in report["bfloat16_budget"].items():
        print(f"{name:>26} {row['epoch_at_most']:9.3f} {row['left_beside_dense_floor']:23.3f} "
              f"{row['bf16_gather_reads']:19.3f}{'' if row['gather_reads_alone_fit'] else '  (do not fit)'}")


def label_propagation(args) -> None:
    lp = ["--label-rate", args.label_rate]
    report = {"epochs": args.epochs, "label_rate": args.label_rate, "threads_per_rank": 1,
              "repeats": args.repeats, "graphs": {}}
    for dataset in args.datasets:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            prepare(root, dataset, args.parts, "hybrid")
            runs = {}
            for parts in args.parts:
                for bits in [32] if parts == 1 else [32, 2]:
                    common = ["--epochs", args.epochs, "--bits", bits]
                    # Without and with LP in turn, so that a noisy stretch of the machine
                    # falls on both sides of some pair; the median pair is reported.
                    pairs = []
                    for _ in range(args.repeats):
                        off = mean_phases(measured_run(root, parts, 1, root / "m.jsonl", *common)[0])
                        on = mean_phases(measured_run(root, parts, 1, root / "m.jsonl", *common, *lp)[0])
                        pairs.append((on["total"] / off["total"], off, on))
                    ratio, off, on = sorted(pairs, key=lambda pair: pair[0])[len(pairs) // 2]
                    runs[f"P={parts} {'FP32' if bits == 32 else f'Int{bits}'}"] = {
                        "epoch_seconds_without_lp": off["total"], "epoch_seconds_with_lp": on["total"],
                        "ratio": ratio, "ratios": [pair[0] for pair in pairs],
                        "phases_without_lp": off, "phases_with_lp": on}
            if not args.no_pyg:
                pairs = []
                for _ in range(args.repeats):
                    off, on = (pyg_epoch_seconds(root, args.epochs, 1, 256, "auto", rate)["epoch_seconds"]
                               for rate in (0.0, args.label_rate))
                    pairs.append((on / off, off, on))
                ratio, off, on = sorted(pairs)[len(pairs) // 2]
                runs["PyG MaskLabel, one process"] = {"epoch_seconds_without_lp": off, "epoch_seconds_with_lp": on,
                                                      "ratio": ratio, "ratios": [pair[0] for pair in pairs]}
            report["graphs"][dataset] = runs
    print(json.dumps(report, indent=2))
    print(f"LP epoch over the same variant's without LP (median of {args.repeats} pairs, range; target <= 1.15):")
    for dataset, runs in report["graphs"].items():
        for name, run in runs.items():
            print(f"{dataset:16s} {name:28s} {run['epoch_seconds_without_lp']:7.3f} s -> "
                  f"{run['epoch_seconds_with_lp']:7.3f} s  LP/no-LP {run['ratio']:.2f} "
                  f"({min(run['ratios']):.2f}-{max(run['ratios']):.2f})")


def mask_label_reference(args) -> None:
    graph = load_graph(args.graph)
    set_threads(args.threads)
    runs = {}
    for rate in (0.0, args.label_rate):
        for seed in args.seeds:
            torch.manual_seed(seed)
            model = PyGModel("sage", graph.features.shape[1], 256, graph.num_classes, label_propagation=rate > 0)
            result = train_baseline(graph, model, args.epochs, 0.01, label_rate=rate)
            runs[("MaskLabel" if rate else "no LP", seed)] = result
    best_val = max(max(r["val_acc"]) for r in runs.values())
    report = {"graph": str(args.graph), "epochs": args.epochs, "label_rate": args.label_rate,
              "best_val_acc": best_val, "models": {}}
    for name in ("no LP", "MaskLabel"):
        mine = [r for (model, _), r in runs.items() if model == name]
        accuracy = [100 * r["test_acc_at_best_val"] for r in mine]
        to_target = {}
        for share in args.relative_targets:
            epochs = [next((e for e, v in enumerate(r["val_acc"], 1) if v >= share * best_val), None) for r in mine]
            seconds = [None if e is None else float(np.sum(r["seconds"][:e])) for e, r in zip(epochs, mine)]
            reached = [e for e in epochs if e is not None]
            summary = (f"{np.mean(reached):.1f} / {np.mean([t for t in seconds if t is not None]):.1f} s"
                       if reached else "—")
            to_target[f"val {share:g} x best"] = {"epochs": epochs, "training_seconds": seconds,
                                                  "summary": f"{summary} ({len(reached)}/{len(mine)})"}
        report["models"][name] = {"test_acc_at_best_val": f"{np.mean(accuracy):.2f} ± {np.std(accuracy, ddof=1):.2f}"
                                  if len(accuracy) > 1 else f"{accuracy[0]:.2f}",
                                  "per_seed": accuracy, "epoch_seconds": float(np.mean([np.mean(r["seconds"][1:])
                                                                                        for r in mine])),
                                  **to_target}
    print(json.dumps(report, indent=2))
    print(f"best validation accuracy of these runs: {100 * best_val:.2f} %; to each share of it: mean epochs / "
          "training seconds over the seeds that reach it (reached/seeds)")
    for name, model in report["models"].items():
        print(f"{name:10s} test acc. {model['test_acc_at_best_val']}  epoch {model['epoch_seconds']:.3f} s  "
              + "  ".join(f"{target}: {to['summary']}" for target, to in model.items() if target.startswith("val ")))


SCALING_COLUMNS = ("model", "bits", "P", "epoch s", "speed-up", "efficiency", "aggregation s", "communication s",
                   "quantization s", "dense s", "MiB sent/epoch", "peak GiB/rank")


def scaling_row(row: dict) -> str:
    """One run of :func:`scaling` as a row of its table (:data:`SCALING_COLUMNS`)."""
    phases = row["phases"]
    cells = [row["model"], row["bits"], row["P"], f"{phases['total']:.3f}", f"{row['speedup']:.2f}",
             f"{row['efficiency']:.2f}", *(f"{phases[k]:.3f}" for k in ("aggregation", "communication", "quantization",
                                                                          "dense")),
             f"{row['mib_sent_per_epoch']:.1f}", f"{row['peak_rss_gib']:.2f}"]
    return "| " + " | ".join(map(str, cells)) + " |"


def scaling(args) -> None:
    """Strong scaling on one node: ``supergcn train`` at each P with one thread per rank,
    each run's row printed as it ends (a run cut short keeps the rows before it)."""
    print(f"{args.dataset}, {args.strategy}, hidden {args.hidden}, heads {args.heads}, one thread per rank, "
          f"epochs 2-{args.epochs}:")
    print("| " + " | ".join(SCALING_COLUMNS) + " |")
    print("|" + "---|" * len(SCALING_COLUMNS), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prepare(root, args.dataset, args.parts, args.strategy, args.models, args.hidden, args.heads)
        # Numba's cache filled once, by one process: no rank compiles inside a measured run.
        for model in args.models:
            for bits in args.bits:
                run_supergcn(root, args.parts[0], 1, root / "warm.jsonl", "--epochs", 1, "--hidden", 16,
                             "--bits", bits, "--model", model, "--heads", args.heads,
                             plan=plan_name(args.parts[0], model))
        for model in args.models:
            for bits in args.bits:
                for parts in args.parts:
                    epochs, usage = measured_run(root, parts, 1, root / "m.jsonl", "--epochs", args.epochs,
                                                 "--hidden", args.hidden, "--bits", bits, "--model", model,
                                                 "--heads", args.heads, plan=plan_name(parts, model))
                    header = json.loads((root / "m.jsonl").read_text().splitlines()[0])
                    row = {"model": model, "bits": bits, "P": parts, "phases": mean_phases(epochs),
                           "mib_sent_per_epoch": float(np.mean([e["bytes"]["sent_total"] for e in epochs]) / 2**20),
                           "peak_rss_gib": usage["peak_rss_gib"], "kernels": header["kernels"]}
                    smallest = row if parts == args.parts[0] else rows[-args.parts.index(parts)]
                    row["speedup"] = smallest["phases"]["total"] / row["phases"]["total"] * args.parts[0]
                    row["efficiency"] = row["speedup"] / parts
                    rows.append(row)
                    print(scaling_row(row), flush=True)
    print(json.dumps({"dataset": args.dataset, "strategy": args.strategy, "hidden": args.hidden, "heads": args.heads,
                      "epochs": args.epochs, "rows": rows}, indent=2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    acc = commands.add_parser("accuracy")
    acc.add_argument("--dataset", default="cora")
    acc.add_argument("--seeds", type=int, default=5)
    acc.add_argument("--first-seed", type=int, default=0, help="the seeds are first-seed, first-seed + 1, ...")
    acc.add_argument("--parts", type=int, nargs="+", default=[1, 2, 4])
    acc.add_argument("--epochs", type=int, default=200)
    acc.add_argument("--strategy", default="hybrid")
    acc.add_argument("--model", default="sage", help="sage, gcn, gin or gat")
    acc.add_argument("--heads", type=int, default=4, help="GAT's attention heads")
    acc.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate, both sides")
    acc.set_defaults(func=accuracy)
    timing = commands.add_parser("epoch-time")
    timing.add_argument("--dataset", default="synthetic-arxiv")
    timing.add_argument("--parts", type=int, nargs="+", default=[2, 4])
    timing.add_argument("--epochs", type=int, default=10)
    timing.add_argument("--threads", type=int, default=2)
    timing.add_argument("--strategy", default="hybrid")
    timing.add_argument("--hidden", type=int, default=256)
    timing.add_argument("--repeats", type=int, default=3, help="timed calls of each floor measurement")
    timing.add_argument("--allocators", nargs="+", default=["glibc", "auto"],
                        help="SUPERGCN_ALLOCATOR values to compare at P = 1, PyG beside each (a library's path "
                             "compares one that is not installed)")
    timing.set_defaults(func=epoch_time)
    strong = commands.add_parser("scaling", help="strong scaling on one node, one thread per rank")
    strong.add_argument("--dataset", default="synthetic-arxiv")
    strong.add_argument("--parts", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    strong.add_argument("--epochs", type=int, default=5)
    strong.add_argument("--strategy", default="hybrid")
    strong.add_argument("--hidden", type=int, default=256)
    strong.add_argument("--bits", nargs="+", default=["32", "2"], help="exchange precisions (32, 8, 4, 2)")
    strong.add_argument("--models", nargs="+", default=["sage"], help="sage, gcn, gin, gat")
    strong.add_argument("--heads", type=int, default=4, help="GAT's attention heads")
    strong.set_defaults(func=scaling)
    labels = commands.add_parser("label-propagation")
    labels.add_argument("--datasets", nargs="+", default=["synthetic-arxiv", "facebook"])
    labels.add_argument("--parts", type=int, nargs="+", default=[1, 3])
    labels.add_argument("--epochs", type=int, default=6)
    labels.add_argument("--label-rate", type=float, default=0.62)
    labels.add_argument("--repeats", type=int, default=3, help="pairs of runs (without, with LP) per setting")
    labels.add_argument("--no-pyg", action="store_true", help="leave PyG's MaskLabel out")
    labels.set_defaults(func=label_propagation)
    reference = commands.add_parser("mask-label-reference")
    reference.add_argument("--graph", type=Path, required=True, help="a prepared graph (data/graphs/<dataset>)")
    reference.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    reference.add_argument("--epochs", type=int, default=60)
    reference.add_argument("--label-rate", type=float, default=0.62)
    reference.add_argument("--threads", type=int, default=2)
    reference.add_argument("--relative-targets", type=float, nargs="+", default=[0.95, 0.98, 0.99])
    reference.set_defaults(func=mask_label_reference)
    baseline = commands.add_parser("pyg-epoch", help="(used by epoch-time) PyG's epoch time on a prepared graph")
    baseline.add_argument("--graph", type=Path, required=True)
    baseline.add_argument("--epochs", type=int, default=5)
    baseline.add_argument("--threads", type=int, default=2)
    baseline.add_argument("--hidden", type=int, default=256)
    baseline.add_argument("--label-rate", type=float, default=0.0)
    baseline.add_argument("--bf16-autocast", action="store_true",
                          help='every epoch under torch.autocast("cpu", dtype=torch.bfloat16)')
    baseline.set_defaults(func=pyg_epoch)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
