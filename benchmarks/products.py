"""Products scale on one node: distributed training on a prepared graph, and PyG beside it.

    .venv/bin/python benchmarks/products.py --graph G --partition P4 --plan P4/hybrid \
        [--hidden 128] [--epochs 3] [--pyg-memory-gib 16]

(prepare, partition and plan with ``supergcn prepare synthetic-products`` etc., or
``benchmarks/foundation.py --dataset synthetic-products --parts 4 --workdir DIR``, which keeps
them in DIR). Prints one JSON document:

* ``supergcn`` — ``supergcn train`` at the plan's P, one thread per rank: every epoch's
  time and breakdown (slowest rank), every rank's peak resident memory, and the machine's
  lowest available memory while it ran;
* ``memory_model`` — what one rank holds, term by term (:mod:`supergcn.perf.memory`), from
  the plan's sizes and the model's widths (the largest rank), beside its measured peak;
* ``pyg`` — PyG's full-batch ``SAGEConv`` model (same widths) for one training step, in a
  child process whose address space is capped at ``--pyg-memory-gib``: its time, or the
  out-of-memory error it met (a measured fact, without taking the machine down).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from supergcn.bench.harness import say_if_oversubscribed
from supergcn.data.graph import load_graph
from supergcn.plan.store import read_plan_manifest

GIB = 2**30


def lowest_available_memory(stop: threading.Event, result: list) -> None:
    """Sample MemAvailable every half second until ``stop``; keep the minimum in ``result``."""
    while not stop.wait(0.5):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                result.append(int(line.split()[1]) * 1024)


def train(args, out: Path) -> dict:
    num_ranks = read_plan_manifest(args.plan)["num_ranks"]
    command = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(num_ranks), sys.executable, "-m",
               "supergcn.cli", "train", "--graph", str(args.graph), "--partition", str(args.partition), "--plan",
               str(args.plan), "--out", str(out), "--threads", "1", "--epochs", str(args.epochs), "--hidden",
               str(args.hidden)]
    say_if_oversubscribed(num_ranks, 1)
    stop, available = threading.Event(), []
    watcher = threading.Thread(target=lowest_available_memory, args=(stop, available), daemon=True)
    watcher.start()
    started = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - started
    stop.set()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    epochs = [r for r in records if r["type"] == "epoch"]
    summary = records[-1]
    return {"P": num_ranks, "hidden": args.hidden, "wall_seconds": wall,
            "epoch_seconds": [e["seconds"]["max"]["total"] for e in epochs],
            "breakdown_slowest_rank": [{k: round(v, 3) for k, v in e["seconds"]["slowest_rank"].items()}
                                       for e in epochs],
            "peak_memory_gib_per_rank": [b / GIB for b in summary["peak_memory_bytes_per_rank"]],
            "lowest_available_memory_gib": min(available) / GIB if available else None,
            "allocator": records[0]["allocator"]["name"]}


def memory_model(args) -> dict:
    """What the largest rank holds while training, term by term (:mod:`supergcn.perf.memory`:
    the plan's sizes, the model's widths; GraphSAGE, float32)."""
    from supergcn.perf.memory import plan_shapes, rank_memory
    from supergcn.perf.methods import Layers

    graph = load_graph(args.graph, mmap=True)
    layers = Layers(graph.features.shape[1], args.hidden, graph.num_classes, 3)
    shape, terms = max(((shape, rank_memory(shape, "sage", layers, "fp32")) for shape in
                        plan_shapes(args.partition, args.plan)), key=lambda item: item[1]["total"])
    return {"rank_rows": shape.nodes, "rows_received": shape.halo_rows,
            "terms_gib": {k: v / GIB for k, v in terms.items() if k != "total"}, "total_gib": terms["total"] / GIB}


def pyg_child(args) -> None:
    """One full-batch training step of PyG's model (run under a memory cap)."""
    import torch
    import torch.nn.functional as F

    from supergcn.distributed.threads import set_threads
    from supergcn.testing.pyg import PyGModel, edge_index_of

    graph = load_graph(args.graph, mmap=True)
    set_threads(2)
    model = PyGModel("sage", graph.features.shape[1], args.hidden, graph.num_classes)
    x = torch.from_numpy(np.asarray(graph.features))
    y = torch.from_numpy(np.asarray(graph.labels))
    train = torch.from_numpy(np.asarray(graph.train_mask))
    edge_index = edge_index_of(graph)
    started = time.perf_counter()
    try:
        F.nll_loss(model(x, edge_index)[train], y[train]).backward()
    except (RuntimeError, MemoryError) as exc:
        print(json.dumps({"outcome": "out of memory", "error": str(exc).splitlines()[0],
                          "seconds_until_failure": time.perf_counter() - started}))
        return
    print(json.dumps({"outcome": "completed", "step_seconds": time.perf_counter() - started}))


def pyg(args) -> dict:
    cap = int(args.pyg_memory_gib * GIB)

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    command = [sys.executable, __file__, "--pyg-child", "--graph", str(args.graph), "--partition",
               str(args.partition), "--plan", str(args.plan), "--hidden", str(args.hidden)]
    result = subprocess.run(command, capture_output=True, text=True, preexec_fn=limit)
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-1:] or ["(no message)"]
        return {"outcome": f"died with exit status {result.returncode}", "error": tail[0],
                "address_space_cap_gib": args.pyg_memory_gib}
    return {**json.loads(result.stdout), "address_space_cap_gib": args.pyg_memory_gib}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", type=Path, required=True)
    parser.add_argument("--partition", type=Path, required=True)
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--pyg-memory-gib", type=float, default=16.0)
    parser.add_argument("--skip-training", action="store_true", help="only the memory model and PyG")
    parser.add_argument("--pyg-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pyg_child:
        pyg_child(args)
        return
    report = {"graph": str(args.graph), "plan": str(args.plan), "memory_model": memory_model(args)}
    if not args.skip_training:
        with tempfile.TemporaryDirectory() as tmp:
            report["supergcn"] = train(args, Path(tmp) / "metrics.jsonl")
    report["pyg"] = pyg(args)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
