"""The memory model (:mod:`supergcn.perf.memory`) against the peak resident memory of real
runs, in fp32 and bf16, and what it says of papers100M and IGB260M on a 28 GiB node.

    .venv/bin/python benchmarks/memory.py measured [--cases synthetic-arxiv:sage:1 ...] [--epochs 2]
        [--threads 2] [--out memory.json]
    .venv/bin/python benchmarks/memory.py scale [--ranks-per-node 4] [--node-gib 28]

``measured`` prepares each case's graph (``dataset:model:P``; Cora, CiteSeer and Facebook
from ``../shared/datasets``), its METIS partition and hybrid plan, trains ``--epochs``
epochs with ``mpiexec -n P`` at each precision and under each of ``--allocators`` and
prints, per case, precision and allocator, the largest rank's peak resident memory (the
run's summary) beside the model's largest rank (its shapes from the same partition and
plan) and the model's terms. The model counts live bytes: glibc's peak is closest to them;
a retaining allocator (mimalloc or jemalloc never purging, what runs use for speed,
:mod:`supergcn.train.allocator`) keeps what was freed, and peaks higher. ``scale`` prints, for
ogbn-papers100M and IGB260M (their published sizes) and 3-layer SAGE, GCN and GAT of
hidden width 256, the model's memory per rank at each P in fp32 and bf16 for a balanced
partition whose ranks receive ``--halo`` rows per owned node each layer (one line per
value; :func:`~supergcn.perf.memory.balanced_shape`), the smallest P whose node
(``--ranks-per-node`` ranks) fits ``--node-gib`` GiB, and the preprocessing budget (the CSR
and the features of the whole graph).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from training import allocator_environment, plan_name, prepare

from supergcn.models import card
from supergcn.perf.memory import balanced_shape, plan_shapes, preprocessing_bytes, rank_memory
from supergcn.perf.methods import Layers
from supergcn.train.metrics import read_metrics

GIB = 2**30
PRECISIONS = ("fp32", "bf16")
DEFAULT_CASES = ["synthetic-arxiv:sage:1", "synthetic-arxiv:gcn:1", "synthetic-arxiv:gat:1", "synthetic-arxiv:sage:2",
                 "facebook:sage:1"]
#: Published sizes: nodes, directed adjacency entries (undirected edges twice), features, classes.
SCALE_GRAPHS = {"ogbn-papers100M": (111_059_956, 2 * 1_615_685_872, 128, 172),
                "IGB260M": (269_346_174, 2 * 3_995_777_033, 1024, 19)}
SCALE_MODELS = ("sage", "gcn", "gat")
#: Attention heads of a model that reads them (its card's training options), as the studies train GAT.
HEADS = 4


def heads_of(model: str) -> int | None:
    """``HEADS`` for a model whose card reads ``heads``, None for the others."""
    return HEADS if "heads" in card(model).training_options else None
SCALE_RANKS = [2**k for k in range(7, 13)]
#: The most ranks the smallest fitting P is searched up to.
MOST_RANKS = 1 << 16


def measured(args) -> None:
    """Model against measurement, one line per case and precision (module docstring)."""
    mpiexec = Path(sys.executable).parent / "mpiexec"
    results = []
    with tempfile.TemporaryDirectory(prefix="supergcn-memory-") as scratch:
        for case in args.cases:
            dataset, model, parts = case.split(":")
            root = Path(scratch) / dataset
            if not (root / "g").exists():
                parts_of = sorted({int(c.split(":")[2]) for c in args.cases if c.startswith(dataset + ":")})
                prepare(root, dataset, parts_of, "hybrid", models=sorted({c.split(":")[1] for c in args.cases}))
            plan = root / plan_name(int(parts), model)
            meta = json.loads((root / "g" / "meta.json").read_text())
            layers = Layers(meta["feature_dim"], 256, meta["num_classes"], 3)
            heads = heads_of(model)
            for allocator, precision in ((a, p) for a in args.allocators for p in PRECISIONS):
                out = Path(scratch) / f"{dataset}-{model}-{parts}-{precision}-{allocator}"
                subprocess.run([str(mpiexec), "-n", parts, sys.executable, "-m", "supergcn.cli", "train",
                                "--graph", str(root / "g"), "--partition", str(root / f"p{parts}"),
                                "--plan", str(plan), "--out", str(out), "--model", model,
                                *(["--heads", str(heads)] if heads else []),
                                "--epochs", str(args.epochs), "--threads", str(args.threads),
                                "--precision", precision], check=True, stdout=subprocess.DEVNULL,
                               env={**allocator_environment(allocator), "OMP_NUM_THREADS": str(args.threads)})
                peak = max(read_metrics(out)[2]["peak_memory_bytes_per_rank"])
                terms = max((rank_memory(shape, model, layers, precision, heads or 1)
                             for shape in plan_shapes(root / f"p{parts}", plan)), key=lambda t: t["total"])
                results.append({"case": case, "precision": precision, "allocator": allocator, "measured_bytes": peak,
                                "model_bytes": terms["total"], "terms": terms})
                print(f"{case:<26} {precision} {allocator:<8} measured {peak / GIB:6.3f} GiB  "
                      f"model {terms['total'] / GIB:6.3f} GiB"
                      f"  ({terms['total'] / peak:5.2f}x)  "
                      + " ".join(f"{k} {v / 2**20:.0f}" for k, v in terms.items() if k != "total"), flush=True)
    for case, allocator in ((c, a) for c in args.cases for a in args.allocators):
        fp32, bf16 = (next(r for r in results if (r["case"], r["precision"], r["allocator"]) == (case, p, allocator))
                      for p in PRECISIONS)
        print(f"{case:<26} {allocator:<8} bf16 / fp32: measured {bf16['measured_bytes'] / fp32['measured_bytes']:.2f}, "
              f"model {bf16['model_bytes'] / fp32['model_bytes']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


def scale(args) -> None:
    """The model's memory per rank at the paper's graph sizes (module docstring)."""
    budget = args.node_gib * GIB / args.ranks_per_node
    print(f"a node: {args.node_gib} GiB, {args.ranks_per_node} ranks -> {budget / GIB:.2f} GiB a rank")
    for graph, (nodes, entries, features, classes) in SCALE_GRAPHS.items():
        pre = preprocessing_bytes(nodes, entries, features)
        print(f"\n{graph}: {nodes:,} nodes, {entries:,} entries, {features} features; whole-graph CSR "
              f"{pre['csr'] / GIB:.1f} GiB, features {pre['features_fp32'] / GIB:.1f} GiB in float32, "
              f"{pre['features_bf16'] / GIB:.1f} GiB in bfloat16")
        layers = Layers(features, 256, classes, 3)
        for model, halo in ((model, halo) for model in SCALE_MODELS for halo in args.halo):
            heads = heads_of(model) or 1
            def total(ranks: int, precision: str) -> int:
                shape = balanced_shape(nodes, entries, ranks, halo)
                return rank_memory(shape, model, layers, precision, heads)["total"]
            row = [f"P={ranks}: " + "/".join(f"{total(ranks, p) / GIB:.1f}" for p in PRECISIONS)
                   for ranks in SCALE_RANKS]
            print(f"  {model}, halo {halo:g}: GiB a rank fp32/bf16  " + "  ".join(row))
            print(f"  {model}, halo {halo:g}: smallest P that fits: " + ", ".join(
                f"{p} {smallest_fitting(lambda ranks, p=p: total(ranks, p) <= budget)}" for p in PRECISIONS))


def smallest_fitting(fits) -> int | str:
    """The smallest P at which ``fits(P)`` (memory per rank falls as P grows), by bisection."""
    if not fits(MOST_RANKS):
        return f"beyond {MOST_RANKS}"
    low, high = 1, MOST_RANKS
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle + 1, high)
    return low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("measured")
    run.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="dataset:model:P")
    run.add_argument("--epochs", type=int, default=2)
    run.add_argument("--threads", type=int, default=2, help="threads per rank")
    run.add_argument("--allocators", nargs="+", default=["glibc", "auto"],
                     help="SUPERGCN_ALLOCATOR values: glibc returns large blocks when freed (its peak is the live "
                          "bytes'); auto is what runs use (a retaining allocator where one is found)")
    run.add_argument("--out", type=Path)
    run.set_defaults(action=measured)
    sizes = commands.add_parser("scale")
    sizes.add_argument("--ranks-per-node", type=int, default=4, help="Fugaku: one rank per CMG")
    sizes.add_argument("--node-gib", type=float, default=28.0, help="usable memory of a node")
    sizes.add_argument("--halo", type=float, nargs="+", default=[0.5, 2.0],
                       help="rows received per owned node each layer")
    sizes.set_defaults(action=scale)
    args = parser.parse_args()
    args.action(args)


if __name__ == "__main__":
    main()
