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

    .venv/bin/python benchmarks/models.py speed [--dataset synthetic-arxiv] [--threads 2]
        [--epochs 6] [--models gin gat] [--heads 4]

Epoch time at P = 1 of ``supergcn train`` and of single-process PyG (``GINConv``,
``GATConv``) on the same graph, model shape and threads, each in its own process (the
first epoch dropped), the ratio PyG / ours, and the floors: the model's GEMMs forward and
backward on all rows (dense) and the gathers its aggregation cannot do without, timed with
``supergcn bench kernels`` at the widths it aggregates (GIN: a sum forward and its
transpose backward, as SAGE's; GAT: the weighted gather forward, and backward the same
gather by row for the scores' gradients and by source for the rows').

    .venv/bin/python benchmarks/models.py int2-error [--dataset cora] [--parts 4]

The relative error (Frobenius, over all ranks) that Int2 leaves in one aggregation of a
GAT layer and in the mean of the same projected rows, against FP32 on the same plan
(hybrid): GAT's scores, maxima and sums travel in float32, so its softmax is exact and
only the rows it weighs are quantized.

    .venv/bin/python benchmarks/models.py kernels [--dataset synthetic-arxiv] [--threads 2]

The attention kernels alone (forward, backward by row, backward by source) against the
mean's gather of the same rows, median seconds of a few calls each.

    .venv/bin/python benchmarks/models.py activation [--rows 169343] [--hidden 256] [--dropout 0.5] [--threads 2]

The fused dropout -> LayerNorm -> ReLU kernel of the hidden layers alone, forward and
forward + backward, median seconds of ``--repeats`` calls.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from training import SHARED, allocator_environment, prepare, run_supergcn

from supergcn.bench.harness import timed
from supergcn.data.datasets import prepare_dataset
from supergcn.data.graph import load_graph, save_graph
from supergcn.distributed.threads import set_threads
from supergcn.models import card, weighted_cover_models
from supergcn.partition.store import load_partition, run_partition
from supergcn.plan.builder import plan_ranks
from supergcn.plan.costs import row_costs
from supergcn.testing.pyg import PyGModel, train_baseline
from supergcn.train.allocator import allocator_in_use, relaunch_with_retaining_allocator


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
                    pre_cost, post_cost = row_costs(card(args.model), args.num_layers, args.hidden, args.heads,
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


def layer_dims(graph, hidden: int, layers: int = 3) -> list[tuple[int, int]]:
    dims = [graph.features.shape[1]] + [hidden] * (layers - 1) + [graph.num_classes]
    return list(zip(dims[:-1], dims[1:]))


def dense_floor(graph, model: str, hidden: int, heads: int, repeats: int = 3) -> float:
    """Seconds of the model's linear layers alone on all rows, forward and backward (every
    weight gradient; input gradients from layer 2 on)."""
    torch.manual_seed(0)
    dims = layer_dims(graph, hidden)
    projection = card(model).always_projects_first
    if projection:  # GAT: one projection per layer: H heads of hidden / H, or H x classes in the last
        layers = [[torch.nn.Linear(a, b if k < len(dims) - 1 else heads * b, bias=False)]
                  for k, (a, b) in enumerate(dims)]
    else:  # GIN's two-layer MLP
        layers = [[torch.nn.Linear(a, b), torch.nn.Linear(b, b)] for a, b in dims]
    x = torch.randn(graph.num_nodes, graph.features.shape[1])

    def step():
        h = x
        for k, linears in enumerate(layers):
            for linear in linears:
                h = linear(h)
            if projection and k == len(layers) - 1:
                h = h.view(len(h), heads, -1).mean(1)
        h.sum().backward()
    return timed(step, repeats)[1]


def gather_seconds(root: Path, width: int, threads: int) -> dict:
    command = [sys.executable, "-m", "supergcn.cli", "bench", "kernels", "--graph", str(root / "g"), "--features",
               str(width), "--threads", str(threads), "--no-pyg"]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True,
                                     env=allocator_environment("auto")).stdout)["seconds"]


def aggregation_floor(root: Path, graph, model: str, hidden: int, heads: int, threads: int) -> float:
    """The gathers of the module docstring at the widths the model aggregates."""
    total, model_card = 0.0, card(model)
    for layer in model_card.exchanges(graph.features.shape[1], hidden, graph.num_classes, 3, heads):
        seconds = gather_seconds(root, layer.width, threads)
        total += seconds["ours_forward"] + layer.backward * model_card.backward_gathers * seconds["ours_backward"]
    return total


def pyg_epoch(args) -> None:
    """One child's PyG epoch time (the first epoch dropped), printed as JSON; under the
    allocator training runs with, as ``benchmarks/training.py`` measures PyG."""
    relaunch_with_retaining_allocator()
    graph = load_graph(args.graph)
    set_threads(args.threads)
    torch.manual_seed(0)
    model = PyGModel(args.model, graph.features.shape[1], args.hidden, graph.num_classes, heads=args.heads)
    seconds = train_baseline(graph, model, args.epochs, 0.01)["seconds"][1:]
    print(json.dumps({"epoch_seconds": float(np.mean(seconds)), "allocator": allocator_in_use()["name"]}))


def speed(args) -> None:
    report = {"dataset": args.dataset, "threads": args.threads, "hidden": args.hidden, "heads": args.heads,
              "epochs": args.epochs, "models": {}}
    with tempfile.TemporaryDirectory(prefix="supergcn-speed-") as temporary:
        root = Path(temporary)
        graph = prepare(root, args.dataset, [1], "hybrid")
        for model in args.models:
            records = run_supergcn(root, 1, args.threads, root / f"{model}.jsonl", "--model", model, "--epochs",
                                   args.epochs, "--hidden", args.hidden, "--heads", args.heads,
                                   allocator=args.allocator)
            epochs = [r for r in records if r["type"] == "epoch"][1:]
            ours = float(np.mean([e["seconds"]["max"]["total"] for e in epochs]))
            phases = {k: float(np.mean([e["seconds"]["slowest_rank"][k] for e in epochs]))
                      for k in ("aggregation", "dense", "elementwise", "optimizer", "remainder")}
            command = [sys.executable, __file__, "pyg-epoch", "--graph", str(root / "g"), "--model", model,
                       "--epochs", str(args.epochs), "--threads", str(args.threads), "--hidden", str(args.hidden),
                       "--heads", str(args.heads)]
            pyg_run = json.loads(subprocess.run(command, check=True, capture_output=True, text=True,
                                                env=allocator_environment(args.allocator)).stdout)
            pyg = pyg_run["epoch_seconds"]
            set_threads(args.threads)
            dense = dense_floor(graph, model, args.hidden, args.heads)
            aggregation = aggregation_floor(root, graph, model, args.hidden, args.heads, args.threads)
            report["models"][model] = {
                "ours_epoch_seconds": ours, "ours_phases": phases, "pyg_epoch_seconds": pyg,
                "allocators": {"ours": next(r for r in records if r["type"] == "header")["allocator"]["name"],
                               "pyg": pyg_run["allocator"]},
                "pyg_over_ours (>= 3)": pyg / ours,
                "floor_seconds": {"dense": dense, "aggregation_gathers": aggregation},
                "ours_over_floor": ours / (dense + aggregation)}
            print(json.dumps({model: report["models"][model]}), flush=True)
    print(json.dumps(report, indent=2))


def int2_error_rank(args) -> None:
    """One rank of ``int2-error``: a GAT layer's aggregation and the mean of the same rows,
    exchanged in FP32 and in Int2 (nearest rounding), on this rank's rows; rank 0 prints
    the relative errors over all ranks."""
    from mpi4py import MPI

    from supergcn.distributed.comm import Communicator
    from supergcn.distributed.graph_ops import GraphOps
    from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
    from supergcn.distributed.timing import PhaseTimer
    from supergcn.models.gat.layer import ATTENTION, Layer, _project, _score
    from supergcn.partition.metis import partition_graph
    from supergcn.testing.plans import build_plans

    comm = MPI.COMM_WORLD
    graph = prepare_dataset(args.dataset, SHARED)
    plan = build_plans(graph, partition_graph(graph, comm.Get_size()), "hybrid")[0][comm.Get_rank()]
    x = torch.from_numpy(np.asarray(graph.features)[plan.owned_old_ids]).float()
    torch.manual_seed(0)
    layer = Layer(x.shape[1], args.hidden, last=False, heads=args.heads)
    squared = {}
    with torch.no_grad():
        z = _project(x, layer.lin.weight, layer.dense_dtype, layer.heads, layer.width)
        source, destination = _score(z, layer.att_src), _score(z, layer.att_dst)
        results = {}
        for bits in (32, 2):
            ops = GraphOps(RankOperators(plan, Communicator(comm), PhaseTimer(), settings=ExchangeSettings(bits=bits)))
            ops.begin_pass(training=True)
            results[bits] = (ops.cached(ATTENTION)(z, source, destination, ops.next_layer(), 0.2, 0.0, False),
                             ops.mean(z.reshape(len(z), -1)))
        for k, name in enumerate(("gat_attention", "sage_mean")):
            exact, quantized = results[32][k], results[2][k]
            squared[name] = (float(((quantized - exact) ** 2).sum()), float((exact ** 2).sum()))
    gathered = comm.gather(squared, root=0)
    if comm.Get_rank() == 0:
        print(json.dumps({name: (sum(r[name][0] for r in gathered) / sum(r[name][1] for r in gathered)) ** 0.5
                          for name in squared}))


def int2_error(args) -> None:
    """The relative error Int2 leaves in one aggregation of GAT and of the mean, at P ranks."""
    command = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(args.parts), sys.executable, __file__,
               "int2-error-rank", "--dataset", args.dataset, "--hidden", str(args.hidden), "--heads", str(args.heads)]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    print(json.dumps({"dataset": args.dataset, "P": args.parts, "hidden": args.hidden, "heads": args.heads,
                      "relative_error_int2_vs_fp32": errors}, indent=2))


def kernels(args) -> None:
    """The attention kernels alone on a graph's own CSR (self loops as GAT has them), H x C
    random rows, against the mean's gather at H x C: median of ``repeats`` calls each."""
    from supergcn.kernels.attention import (
        AttentionCsr,
        attention_backward_rows,
        attention_backward_sources,
        attention_forward,
    )
    from supergcn.kernels.gather import GatherCsr

    set_threads(args.threads)
    graph = prepare_dataset(args.dataset, SHARED)
    indptr, indices, n = np.asarray(graph.indptr), np.asarray(graph.indices), graph.num_nodes
    rows = np.repeat(np.arange(n), np.diff(indptr))
    not_loop = rows != indices
    csr = AttentionCsr(np.concatenate([rows[not_loop], np.arange(n)]),
                       np.concatenate([indices[not_loop], np.arange(n)]), n, n)
    heads, width = args.heads, args.hidden // args.heads
    rng = np.random.default_rng(0)
    z, grad = (rng.standard_normal((n, heads, width)).astype(np.float32) for _ in range(2))
    source, destination = (rng.standard_normal((n, heads)).astype(np.float32) for _ in range(2))
    out, maxima, sums = np.empty_like(z), np.empty((n, heads), np.float32), np.empty((n, heads), np.float32)
    no_rows, no_scalars = np.empty((0, heads, width), np.float32), np.empty((0, heads), np.float32)
    weight, entry_grad = (np.empty((csr.num_entries, heads), np.float32) for _ in range(2))
    grad_z, grad_source, grad_destination = np.empty_like(z), np.empty_like(source), np.empty_like(destination)
    projected = np.empty_like(source)
    gather, flat_out = GatherCsr(csr.indptr, csr.indices, n), np.empty((n, heads * width), np.float32)
    calls = {
        "forward": lambda: attention_forward(csr.indptr, csr.indices, z, source, destination, csr.piece_indptr,
                                             csr.piece_order, no_rows, no_scalars, no_scalars, 0.2, True, out,
                                             maxima, sums),
        "backward_by_row": lambda: attention_backward_rows(
            csr.indptr, csr.indices, z, source, destination, maxima, sums, grad, projected, csr.piece_indptr,
            csr.piece_order, no_scalars, 0.2, weight, entry_grad, grad_destination, no_rows, no_scalars),
        "backward_by_source": lambda: attention_backward_sources(
            csr.transpose_indptr, csr.transpose_entries, csr.transpose_rows, weight, entry_grad, grad, grad_z,
            grad_source),
        "mean_gather": lambda: gather.matmul(z.reshape(n, -1), out=flat_out),
    }
    seconds = {name: timed(call, args.repeats)[1] for name, call in calls.items()}
    print(json.dumps({"dataset": args.dataset, "threads": args.threads, "heads": heads, "width": width,
                      "entries": csr.num_entries, "seconds": seconds,
                      "over_mean_gather": {k: v / seconds["mean_gather"] for k, v in seconds.items()}}, indent=2))


def activation(args) -> None:
    """The fused dropout -> LayerNorm -> ReLU kernel of every model's hidden layers, alone on
    rows x hidden float32 rows: median seconds of ``repeats`` forward and forward + backward
    calls at the dropout rate given."""
    from supergcn.kernels.activation import dropout_norm_relu

    set_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(args.rows, args.hidden, requires_grad=True)
    norm, upstream = torch.nn.LayerNorm(args.hidden), torch.randn(args.rows, args.hidden)

    def forward():
        with torch.no_grad():
            dropout_norm_relu(x, norm, args.dropout, training=True, seed=1)

    def forward_backward():
        out = dropout_norm_relu(x, norm, args.dropout, training=True, seed=1)
        torch.autograd.grad(out, [x, norm.weight, norm.bias], upstream)
    seconds = {name: timed(call, args.repeats)[1] for name, call in
               (("forward", forward), ("forward_backward", forward_backward))}
    print(json.dumps({"rows": args.rows, "hidden": args.hidden, "dropout": args.dropout, "threads": args.threads,
                      "seconds": seconds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    sub = commands.add_parser("volume", help="GAT's bytes per epoch under each strategy and cover")
    sub.add_argument("--model", default="gat", choices=weighted_cover_models(),
                     help="a model whose PRE and POST rows cost differently")
    sub.add_argument("--datasets", nargs="+", default=["synthetic-arxiv", "synthetic-products"])
    sub.add_argument("--parts", nargs="+", type=int, default=[16, 64])
    sub.add_argument("--hidden", type=int, default=256)
    sub.add_argument("--heads", type=int, default=4)
    sub.add_argument("--num-layers", type=int, default=3)
    sub.add_argument("--workdir", type=Path, help="keep the prepared graphs and partitions here")
    sub = commands.add_parser("speed", help="epoch time at P = 1 against PyG, with the floors")
    sub.add_argument("--dataset", default="synthetic-arxiv")
    sub.add_argument("--models", nargs="+", default=["gin", "gat"])
    sub.add_argument("--threads", type=int, default=2)
    sub.add_argument("--epochs", type=int, default=6)
    sub.add_argument("--hidden", type=int, default=256)
    sub.add_argument("--heads", type=int, default=4)
    # PyG's GAT holds E x H x C tensors: under mimalloc, which keeps freed pages, its peak
    # outgrew 24 GiB on the arxiv shape; glibc for both is the same-allocator comparison there.
    sub.add_argument("--allocator", default="auto", help="SUPERGCN_ALLOCATOR of both sides (auto, glibc, ...)")
    sub = commands.add_parser("pyg-epoch", help=argparse.SUPPRESS)
    sub.add_argument("--graph", type=Path, required=True)
    sub.add_argument("--model", required=True)
    for name, default in (("epochs", 6), ("threads", 2), ("hidden", 256), ("heads", 4)):
        sub.add_argument(f"--{name}", type=int, default=default)
    for name in ("int2-error", "int2-error-rank"):
        sub = commands.add_parser(name, help="the relative error Int2 leaves in one aggregation" if name == "int2-error"
                                  else argparse.SUPPRESS)
        sub.add_argument("--dataset", default="cora")
        sub.add_argument("--parts", type=int, default=4)
        sub.add_argument("--hidden", type=int, default=256)
        sub.add_argument("--heads", type=int, default=4)
    sub = commands.add_parser("kernels", help="the attention kernels alone, against the mean's gather")
    sub.add_argument("--dataset", default="synthetic-arxiv")
    sub.add_argument("--threads", type=int, default=2)
    sub.add_argument("--hidden", type=int, default=256)
    sub.add_argument("--heads", type=int, default=4)
    sub.add_argument("--repeats", type=int, default=3)
    sub = commands.add_parser("activation", help="the fused dropout -> LayerNorm -> ReLU kernel alone")
    sub.add_argument("--rows", type=int, default=169_343, help="rows (default: ogbn-arxiv's nodes)")
    sub.add_argument("--hidden", type=int, default=256)
    sub.add_argument("--dropout", type=float, default=0.5)
    sub.add_argument("--threads", type=int, default=2)
    sub.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    if args.command == "activation":
        return activation(args)
    if args.command == "kernels":
        return kernels(args)
    if args.command == "int2-error":
        return int2_error(args)
    if args.command == "int2-error-rank":
        return int2_error_rank(args)
    if args.command == "speed":
        return speed(args)
    if args.command == "pyg-epoch":
        return pyg_epoch(args)
    records = volume(args)
    columns = ["dataset", "P", "bits", "pre_MiB", "post_MiB", "hybrid_fewest_rows_MiB", "hybrid_weighted_MiB",
               "weighted_over_post", "pairs_worse_than_pre_or_post"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for record in records:
        print("| " + " | ".join(str(record[c]) for c in columns) + " |")


if __name__ == "__main__":
    main()
