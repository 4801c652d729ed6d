"""MixGCN's replicated adjacency against the memory a rank may use (``supergcn train
--memory-per-rank``): the bytes counted are a real run's (its metrics header) and bound a
real build's peak (tracemalloc); a copy that does not fit is refused before any rank
starts, with one line and nothing written, under the launcher and under plain mpiexec."""

import json
import math
import os
import subprocess
import sys
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from supergcn.data.graph import load_graph, read_graph_meta
from supergcn.distributed.operators import SparseOperator
from supergcn.methods.mixgcn import replicated_adjacency_bytes, replication_peak_bytes
from supergcn.methods.mixgcn.exchange import _renumbered

from conftest import mpiexec, run_cli

MIB = 2**20


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """synthetic-small (20,000 nodes, 240,000 entries: a copy of 6 MiB at its peak) in two
    parts, with its hybrid plan, and its manifest's N and nnz."""
    root = tmp_path_factory.mktemp("mop")
    for step in (["prepare", "synthetic-small", "--out", root / "g"],
                 ["partition", "--graph", root / "g", "--parts", 2, "--out", root / "p"],
                 ["plan", "--graph", root / "g", "--partition", root / "p", "--strategy", "hybrid", "--out",
                  root / "q"]):
        result = run_cli(*step)
        assert result.returncode == 0, result.stderr
    meta = read_graph_meta(root / "g")
    return SimpleNamespace(root=root, nodes=meta["num_nodes"], entries=meta["num_edges_directed"])


def train_mop(small, out, memory_mib, launched: bool):
    """``supergcn train --parallelism mop`` at P = 2 for one epoch: started by its own
    launcher (logging to out/log) or by mpiexec."""
    options = ["--graph", small.root / "g", "--partition", small.root / "p", "--plan", small.root / "q", "--out",
               out / "m.jsonl", "--parallelism", "mop", "--memory-per-rank", memory_mib, "--epochs", 1,
               "--hidden", 8]
    command = [sys.executable, "-m", "supergcn.cli", "train", *map(str, options)]
    if launched:
        command += ["--launcher", f"{mpiexec()} -n 2", "--log", str(out / "log")]
    else:
        command = [mpiexec(), "-n", "2", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_the_estimates_by_hand():
    # 8 B per row pointer (N + 1) and per entry; the torch kernels' float32 value per entry besides.
    assert replicated_adjacency_bytes(3, 10) == 8 * 4 + 8 * 10
    assert replicated_adjacency_bytes(3, 10, "torch") == 8 * 4 + 12 * 10
    assert replication_peak_bytes(3, 10) == 3 * (8 * 4 + 8 * 10) + 65536


@pytest.mark.parametrize("launched", [True, False], ids=["launcher", "mpiexec"])
def test_a_copy_that_does_not_fit_is_refused_before_the_ranks_start(small, tmp_path, launched):
    peak = 24 * (small.nodes + 1 + small.entries) + 65536  # 6,305,560 B: 6 MiB do not hold it
    result = train_mop(small, tmp_path, peak // MIB, launched)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("supergcn train: error: MixGCN holds a copy of the whole adjacency of "
                           "synthetic-small on every rank: 6.0 MiB while it is built (2.0 MiB kept), more than the "
                           "6 MiB a rank may use"), line
    assert line.endswith("or use --parallelism partition")
    assert list(tmp_path.iterdir()) == []


def test_a_copy_that_fits_trains_and_its_header_counts_the_estimate(small, tmp_path):
    peak = 24 * (small.nodes + 1 + small.entries) + 65536
    result = train_mop(small, tmp_path, math.ceil(peak / MIB), launched=True)
    assert result.returncode == 0, (tmp_path / "log").read_text()[-3000:]
    with open(tmp_path / "m.jsonl") as metrics:
        header = json.loads(metrics.readline())
    kept = header["mixture_of_parallelism"]["replicated_adjacency_bytes"]
    assert kept == [8 * (small.nodes + 1 + small.entries)] * 2
    assert kept == [replicated_adjacency_bytes(small.nodes, small.entries)] * 2


@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_the_peak_bounds_a_real_build_of_the_copy(small, index_type):
    """The build of supergcn.methods.mixgcn (renumbering, then the numba operator), traced:
    within the estimate, which is tight where the graph stores int64 column indices."""
    stored = load_graph(small.root / "g")
    graph = SimpleNamespace(indptr=stored.indptr, indices=stored.indices.astype(index_type))
    order = np.random.default_rng(0).permutation(small.nodes).astype(np.int64)
    tracemalloc.start()
    try:
        operator = SparseOperator(_renumbered(graph, order), "numba", symmetric=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    estimate = replication_peak_bytes(small.nodes, small.entries)
    assert operator.nbytes == replicated_adjacency_bytes(small.nodes, small.entries)
    assert peak <= estimate
    # Three int64 words per node and entry at once, all but the 64 KiB margin, with int64 indices.
    assert peak >= (estimate - 65536 if index_type is np.int64 else 0.6 * estimate)
