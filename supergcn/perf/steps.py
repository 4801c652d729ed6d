"""The pipeline's steps as the benchmarks run them: each in a fresh process, with its own
seconds and peak memory.

A step runs in a spawned process that reports its own peak (``VmHWM``: Linux's
``ru_maxrss`` would carry the parent's peak into the child), so one step's peak is not
hidden behind an earlier one's, and the figures match what the pipeline's rules (one
process per step) need.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from supergcn.data.datasets import prepare_dataset
from supergcn.data.datasets.synthetic import PLANTED_PRESETS
from supergcn.data.graph import load_graph, read_graph_meta, save_graph
from supergcn.data.storage import peak_memory_mib
from supergcn.partition.store import Engine, load_partition, run_partition
from supergcn.plan.store import run_plan


def prepare_step(dataset: str, scale: float, out: Path) -> dict:
    """Prepare ``dataset`` (a synthetic preset shrunk by ``scale`` below 1) into ``out``."""
    started = time.perf_counter()
    if scale == 1.0:
        graph = prepare_dataset(dataset)
    else:
        preset = PLANTED_PRESETS[dataset]
        shrunk = dataclasses.replace(preset, num_nodes=round(preset.num_nodes * scale),
                                     num_edges=round(preset.num_edges * scale))
        graph = shrunk.generate(f"{dataset}-x{scale:g}", seed=0)
    return save_graph(graph, out, seconds=time.perf_counter() - started)


def partition_step(graph_dir: Path, parts: int, out: Path, edge_fraction: float, engine: Engine) -> dict:
    """Partition a prepared graph into ``parts`` with ``engine`` (reverse Cuthill–McKee's
    equal ranges balance the node count alone)."""
    graph = load_graph(graph_dir, mmap=True)
    constraints = {"constraints": ("nodes",)} if engine.name == "rcm" else {}
    return run_partition(graph, read_graph_meta(graph_dir)["hash"], parts, out, edge_fraction=edge_fraction,
                         engine=engine, **constraints)


def plan_step(graph_dir: Path, partition_dir: Path, out: Path) -> dict:
    """The hybrid plan of a partition."""
    graph_hash = read_graph_meta(graph_dir)["hash"]
    graph = load_graph(graph_dir, mmap=True)
    partition, part_manifest = load_partition(partition_dir, graph_hash)
    return run_plan(graph, graph_hash, partition, part_manifest["partition_hash"], "hybrid", out)


def _measured(step, *args) -> tuple[dict, float, float]:
    started = time.perf_counter()
    result = step(*args)
    # a step whose work runs in a child of its own (KaMinPar) records the peak it reached in its manifest
    recorded = result.get("peak_memory_mib", 0.0) if isinstance(result, dict) else 0.0
    return result, time.perf_counter() - started, max(peak_memory_mib(), recorded)


def in_child(step, *args) -> tuple[dict, dict]:
    """Run ``step(*args)`` in a fresh process; return its result and {seconds, peak GiB}."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        result, seconds, peak_mib = pool.submit(_measured, step, *args).result()
    return result, {"seconds": round(seconds, 2), "peak_gib": round(peak_mib / 1024, 3)}


def in_workdir(args, run):
    """``run(args, directory)`` in ``args.workdir`` (kept) or in a temporary directory."""
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return run(args, args.workdir)
    with tempfile.TemporaryDirectory() as tmp:
        return run(args, Path(tmp))
