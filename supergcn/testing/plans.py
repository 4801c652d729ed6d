"""Reference implementations the tests hold the package to; not used by the pipeline.

Like PyG's ``torch_geometric.testing``: code that runs the distributed algorithm in one
process, so that tests and benchmarks can compare the MPI path against it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from supergcn.data.graph import Graph
from supergcn.partition.partition import Partition
from supergcn.plan.builder import plan_ranks
from supergcn.plan.rank_plan import RankPlan
from supergcn.plan.store import PAIRS_FILE


def build_plans(graph: Graph, partition: Partition, strategy: str,
                row_costs: tuple[int, int] | None = None) -> tuple[list[RankPlan], dict]:
    """Every rank's plan in memory, and the statistics (:func:`plan_ranks`, with its ``row_costs``)."""
    plans: list[RankPlan] = []
    with tempfile.TemporaryDirectory(prefix="supergcn-plan-") as scratch:
        pairs_path = Path(scratch) / PAIRS_FILE
        stats = plan_ranks(graph, partition, strategy, scratch, plans.append, pairs_path, row_costs)
        with np.load(pairs_path) as pairs:
            stats["pairs"] = {name: pairs[name] for name in pairs.files}
    return plans, stats


def aggregate_in_process(plans: list[RankPlan], features: np.ndarray) -> np.ndarray:
    """Run the whole distributed mean aggregation in one process, in float64.

    ``features`` are indexed by new ids. Each rank pre-aggregates and gathers its send
    buffer (the ``send`` operator); the buffers are routed as Alltoallv would route them;
    each rank adds local
    and remote contributions and divides by the global in-degree. This is the reference
    the MPI trainer is held to, and the check that a plan reproduces ÂX.
    """
    x = np.asarray(features, dtype=np.float64)
    blocks = [x[p.offset:p.offset + p.num_owned] for p in plans]
    matrices = [p.matrices() for p in plans]
    send_chunks = [np.split(ops["send"] @ block, np.cumsum(plan.send_counts)[:-1])
                   for plan, ops, block in zip(plans, matrices, blocks)]
    out = np.empty_like(x)
    for plan, ops, block in zip(plans, matrices, blocks):
        received = np.concatenate([send_chunks[j][plan.rank] for j in range(len(plans))])
        total = ops["local"] @ block + ops["remote"] @ received
        degree = plan.in_degree.astype(np.float64)
        out[plan.offset:plan.offset + plan.num_owned] = np.divide(
            total, degree[:, None], out=np.zeros_like(total), where=degree[:, None] > 0)
    return out


def edgeless_plan(n: int) -> SimpleNamespace:
    """What a model's normalisation reads of a rank's plan, for ``n`` owned nodes and no
    edges: for tests that stand in for the rank's aggregations.

    Args:
        n: owned nodes.

    Returns:
        ``in_degree``, ``num_owned``, ``local_indptr`` and ``local_indices``.
    """
    return SimpleNamespace(in_degree=np.zeros(n, dtype=np.int64), num_owned=n,
                           local_indptr=np.zeros(n + 1, dtype=np.int64), local_indices=np.zeros(0, dtype=np.int64))


def write_steps(root: Path, dataset: str, parts: int, strategies: tuple[str, ...]) -> Path:
    """A built-in ``dataset`` prepared into ``root/graph``, partitioned in ``parts`` into
    ``root/partition`` and planned with each of ``strategies`` into ``root/<strategy>``: the
    directories ``supergcn train`` reads, written through the steps' own functions.

    Args:
        root: an empty directory.
        dataset: a built-in dataset's name (a small one: it is prepared in memory).
        parts: the partition's parts.
        strategies: the plans to write.

    Returns:
        ``root``.
    """
    from supergcn.data.datasets import prepare_dataset
    from supergcn.data.graph import load_graph, save_graph
    from supergcn.partition.store import load_partition, run_partition
    from supergcn.plan.store import run_plan

    meta = save_graph(prepare_dataset(dataset), root / "graph")
    graph = load_graph(root / "graph")
    manifest = run_partition(graph, meta["hash"], parts, root / "partition")
    partition, _ = load_partition(root / "partition")
    for strategy in strategies:
        run_plan(graph, meta["hash"], partition, manifest["partition_hash"], strategy, root / strategy)
    return root


#: A graph worked by hand for the two-rank jobs of the compared methods' tests: rank 0 owns
#: nodes 0, 1, 2 and rank 1 nodes 3, 4, 5; local edges 0-1, 1-2, 3-4 and cut edges 0-3,
#: 0-4, 1-4, 2-5. Each node's local and remote neighbours:
HAND_LOCAL = {0: [1], 1: [0, 2], 2: [1], 3: [4], 4: [3], 5: []}
HAND_REMOTE = {0: [3, 4], 1: [4], 2: [5], 3: [0], 4: [0, 1], 5: [2]}


def hand_graph() -> tuple[Graph, Partition]:
    """The graph of :data:`HAND_LOCAL` and :data:`HAND_REMOTE` (ids kept by the
    renumbering) and its partition in two.

    Returns:
        (graph, partition).
    """
    from supergcn.data.graph import build_graph

    src = np.array([0, 1, 3, 0, 0, 1, 2])
    dst = np.array([1, 2, 4, 3, 4, 4, 5])
    graph = build_graph("hand", src, dst, np.zeros((6, 1)), np.zeros(6), np.ones(6), np.zeros(6), np.zeros(6))
    return graph, Partition(np.array([0, 0, 0, 1, 1, 1]), 2)
