"""A partition of a graph's nodes into P parts, the contiguous renumbering it implies, and
what it balances.

SuperGCN balances three quantities per part: node count, in-degree (a proxy for
aggregation work) and training nodes (loss and label work), the *constraints*
(:func:`constraint_weights`). An engine that balances one weight (pymetis, KaMinPar) is
given them folded into one (:func:`combined_weight`),

    w(v) = sum_k round(S * c_k(v) / mean(c_k)),

so that each constraint contributes the same total weight; the METIS library balances
each on its own (:mod:`supergcn.partition.metis`). The manifest reports the balance of
each constraint separately (:func:`balance_report`), so the effect of folding is visible.

Renumbering: part ``r`` owns the new ids ``offsets[r] .. offsets[r+1]-1``; within a part
the original order is kept (a stable sort by part).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from supergcn.data.digests import hash_arrays
from supergcn.data.graph import Graph, adjacency_blocks
from supergcn.errors import SuperGCNError
from supergcn.naming import PARTITION_CONSTRAINTS

_METIS_WEIGHT_BUDGET = 2**30  # total vertex weight must stay well inside METIS's int32 idx_t
_WEIGHT_RESOLUTION = 16


@dataclass
class Partition:
    """Part id of every node (original ids) and the derived renumbering (computed once).

    Args:
        parts: part id (0..P-1) of every node, in the graph's ids.
        num_parts: the number of parts, P.
    """

    parts: np.ndarray
    num_parts: int

    @cached_property
    def sizes(self) -> np.ndarray:
        """Nodes of each part (P of them)."""
        return np.bincount(self.parts, minlength=self.num_parts)

    @cached_property
    def offsets(self) -> np.ndarray:
        """``offsets[r]`` is the first new id owned by part r; ``offsets[P]`` = n."""
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    @cached_property
    def new_to_old(self) -> np.ndarray:
        """The original id of each new id: the nodes sorted by part, stably."""
        return np.argsort(self.parts, kind="stable")

    @cached_property
    def old_to_new(self) -> np.ndarray:
        """The new id (int64) of each original id; the inverse of :attr:`new_to_old`."""
        inverse = np.empty(len(self.parts), dtype=np.int64)
        inverse[self.new_to_old] = np.arange(len(self.parts))
        return inverse

    def content_hash(self) -> str:
        """A hash of the parts and P, which names the partition to the steps downstream.

        Returns:
            32 hexadecimal digits (:func:`~supergcn.data.digests.hash_arrays`).
        """
        return hash_arrays({"parts": self.parts, "num_parts": np.asarray(self.num_parts)})


def constraint_weights(graph: Graph, constraints=PARTITION_CONSTRAINTS) -> dict[str, np.ndarray]:
    """The weight of every node under each balance constraint: 1 (``nodes``), its in-degree
    (``in_degree``) and 1 if it is a training node (``train``).

    Args:
        graph: the graph.
        constraints: names from :data:`supergcn.naming.PARTITION_CONSTRAINTS`.

    Returns:
        Constraint name -> int64 weights (n), in the order of ``constraints``.

    Raises:
        SuperGCNError: an unknown constraint.
    """
    available = {
        "nodes": lambda: np.ones(graph.num_nodes, dtype=np.int64),
        "in_degree": lambda: graph.in_degree.astype(np.int64),
        "train": lambda: graph.train_mask.astype(np.int64),
    }
    unknown = set(constraints) - set(available)
    if unknown:
        raise SuperGCNError(f"unknown partition constraint(s) {sorted(unknown)}",
                            f"choose from {list(PARTITION_CONSTRAINTS)}")
    return {name: available[name]() for name in constraints}


def combined_weight(weights: dict[str, np.ndarray]) -> np.ndarray:
    """One METIS vertex weight in which every constraint has the same total (see module doc).

    Args:
        weights: constraint name -> per-node weights (:func:`constraint_weights`); those
            summing to zero are left out.

    Returns:
        int64 weights (n), each at least 1, every active constraint adding about the same total.
    """
    n = len(next(iter(weights.values())))
    active = {name: w for name, w in weights.items() if w.sum() > 0}
    scale = max(1, min(_WEIGHT_RESOLUTION, _METIS_WEIGHT_BUDGET // max(1, n * len(active))))
    total = np.zeros(n, dtype=np.int64)
    for w in active.values():
        total += np.rint(scale * w / w.mean()).astype(np.int64)
    # METIS treats a zero-weight vertex as free; every node costs at least something.
    return np.maximum(total, 1)


def capped_weight(weight: np.ndarray, num_parts: int) -> np.ndarray:
    """``weight`` with no node heavier than one part's share of the total.

    With thousands of parts a hub's in-degree alone can outweigh a part (on
    ``synthetic-products`` at P = 8,192 the heaviest node weighed 3.2 parts' shares): no
    partition then meets the balance, and KaMinPar answered with empty parts. Capping
    makes the balance feasible; the hub's edges stay where they are, so the manifest's
    edge imbalance shows what the cap hides. The cap lowers the total, so it is applied
    until no node exceeds the share of the new total.

    Args:
        weight: per-node integer weights.
        num_parts: the number of parts, P.

    Returns:
        A capped copy.
    """
    weight = weight.copy()
    while True:
        share = max(1, int(weight.sum()) // num_parts)
        if weight.max(initial=0) <= share:
            return weight
        np.minimum(weight, share, out=weight)


def check_num_parts(graph: Graph, num_parts: int) -> None:
    """Refuse a number of parts the graph cannot be split into.

    Args:
        graph: the graph to split.
        num_parts: the number of parts, P.

    Raises:
        SuperGCNError: P is below 1 or above the graph's nodes.
    """
    if num_parts < 1:
        raise SuperGCNError(f"number of parts must be at least 1, got {num_parts}", "pass --parts 1 or more")
    if num_parts > graph.num_nodes:
        raise SuperGCNError(f"cannot split {graph.num_nodes} nodes into {num_parts} parts",
                            "use P <= number of nodes")


def nonempty(partition: Partition, engine: str, graph: Graph) -> Partition:
    """Refuse a partition an engine returned with an empty part.

    Args:
        partition: the engine's partition.
        engine: the engine's name, for the message.
        graph: the graph partitioned, for the message.

    Returns:
        ``partition``, unchanged.

    Raises:
        SuperGCNError: a part holds no node.
    """
    if np.any(partition.sizes == 0):
        raise SuperGCNError(f"{engine} left a part empty for P={partition.num_parts} on {graph.num_nodes} nodes",
                            "use fewer parts for this graph")
    return partition


def edge_cut(graph: Graph, parts: np.ndarray) -> int:
    """Undirected edges whose endpoints lie in different parts (counted a block of rows at
    a time, so no array as long as the adjacency is made).

    Args:
        graph: the graph.
        parts: part id of every node.

    Returns:
        The cut, in undirected edges.

    Raises:
        SuperGCNError: a neighbour id lies outside the graph's nodes.
    """
    cut = 0
    for _, _, rows, indices in adjacency_blocks(graph, what="partition: edge cut"):
        cut += int(np.count_nonzero(parts[rows] != parts[indices]))
    return cut // 2


def part_totals(graph: Graph, partition: Partition) -> dict[str, np.ndarray]:
    """Per part: its nodes, its edges (the in-degrees of its nodes) and its training nodes.

    Args:
        graph: the graph.
        partition: its partition.

    Returns:
        ``nodes``, ``edges`` and ``train_nodes`` -> int64 totals per part (P).
    """
    return {name: np.bincount(partition.parts, weights=weight, minlength=partition.num_parts).astype(np.int64)
            for name, weight in (("nodes", None), ("edges", graph.in_degree), ("train_nodes", graph.train_mask))}


def balance_report(totals: dict[str, np.ndarray]) -> dict:
    """Max/mean imbalance of each of :func:`part_totals` (None where a total is zero).

    Args:
        totals: name -> totals per part (:func:`part_totals`).

    Returns:
        Name -> ``{"imbalance_max_over_mean": max / mean or None}``.
    """
    return {name: {"imbalance_max_over_mean": float(per_part.max() / per_part.mean()) if per_part.sum() > 0 else None}
            for name, per_part in totals.items()}
