"""METIS partitioning with SuperGCN's vertex weights, renumbered into contiguous ranges.

SuperGCN balances three quantities per part: node count, in-degree (a proxy for
aggregation work) and training nodes (loss and label work). METIS supports this as a
multi-constraint partition (``ncon`` weights per vertex).

The installed ``pymetis`` cannot pass several constraints: its wrapper derives ``ncon``
from the length of the weight list divided by ``len(xadj) = n + 1``, which is 1 for
any ``ncon * n`` weights, and METIS then reads only the first ``n`` entries of the
interleaved list (see ``tests/partition/test_metis.py::test_pymetis_ignores_multiconstraint``,
which measures it). By default we therefore combine the constraints into one integer weight

    w(v) = sum_k round(S * c_k(v) / mean(c_k)),

so each constraint contributes the same total weight, and report the balance of each
constraint separately in ``partition.json`` so its effect is visible. With
``separate_constraints`` METIS balances each constraint on its own (``ncon`` weights per
vertex), through the METIS library itself (:mod:`supergcn.partition.libmetis`).

Memory. METIS keeps every level of its coarsening hierarchy, each with an adjacency and
an edge-weight array of its ``idx_t`` (64-bit in pymetis's build): about 16 bytes per
adjacency entry per level. On graphs whose edges rarely merge when vertices pair up
(random-like ones such as the planted-partition presets), every level keeps nearly all
entries: METIS's own report on products-shaped 1/8 scale (15.5 M entries, P = 8) shows
7 levels of 15.5 M .. 10.2 M entries, so METIS needs about 7 x 16 = 110 bytes per entry,
some 13 GiB at full products scale. ``edge_fraction`` < 1 hands METIS a seeded uniform
sample of the edges instead (the cut and balance are still measured on the whole graph;
what the sample costs in cut, measured at 1/8 products scale: README, "Partitioning").

Renumbering: part ``r`` owns the new ids ``offsets[r] .. offsets[r+1]-1``; within a part
the original order is kept (a stable sort by part).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from supergcn.data.graph import Graph, adjacency_blocks, check_neighbour_ids
from supergcn.data.storage import atomic_output_dir, hash_arrays, load_array, peak_memory_mib, read_json, write_json
from supergcn.errors import SuperGCNError
from supergcn.naming import PARTITION_CONSTRAINTS, PARTITION_ENGINES
from supergcn.partition.rows import write_rank_rows

#: Version 2 keeps the per-part totals in ``part_totals.npz`` and records the engine;
#: version 3 adds the node arrays in rank order (:mod:`supergcn.partition.rows`).
PARTITION_FORMAT = "supergcn-partition/3"
_TOTALS_FILE = "part_totals.npz"
_METIS_WEIGHT_BUDGET = 2**30  # total vertex weight must stay well inside METIS's int32 idx_t
_WEIGHT_RESOLUTION = 16


@dataclass
class Partition:
    """Part id of every node (original ids) and the derived renumbering (computed once)."""

    parts: np.ndarray
    num_parts: int

    @cached_property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.parts, minlength=self.num_parts)

    @cached_property
    def offsets(self) -> np.ndarray:
        """``offsets[r]`` is the first new id owned by part r; ``offsets[P]`` = n."""
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    @cached_property
    def new_to_old(self) -> np.ndarray:
        return np.argsort(self.parts, kind="stable")

    @cached_property
    def old_to_new(self) -> np.ndarray:
        inverse = np.empty(len(self.parts), dtype=np.int64)
        inverse[self.new_to_old] = np.arange(len(self.parts))
        return inverse

    def content_hash(self) -> str:
        return hash_arrays({"parts": self.parts, "num_parts": np.asarray(self.num_parts)})


def constraint_weights(graph: Graph, constraints=PARTITION_CONSTRAINTS) -> dict[str, np.ndarray]:
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
    """One METIS vertex weight in which every constraint has the same total (see module doc)."""
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
    """
    weight = weight.copy()
    while True:
        share = max(1, int(weight.sum()) // num_parts)
        if weight.max(initial=0) <= share:
            return weight
        np.minimum(weight, share, out=weight)


def metis_adjacency(graph: Graph, idx_t) -> tuple[np.ndarray, np.ndarray]:
    """``(xadj, adjncy)`` of ``graph`` without its self loops (METIS wants none), of METIS's
    integer type ``idx_t``, so that pymetis passes them on without copying them again.

    A self loop is stored once, in its own row: removing it from row v shifts every later
    row start by the loops in rows 0..v.
    """
    row_ids = np.repeat(np.arange(graph.num_nodes, dtype=graph.indices.dtype), graph.in_degree)
    loops = np.flatnonzero(graph.indices == row_ids)
    del row_ids  # one n_edges array less while the idx_t copy is made
    if len(loops) == 0:
        return np.asarray(graph.indptr, dtype=idx_t), graph.indices.astype(idx_t)
    loop_rows = np.searchsorted(graph.indptr, loops, side="right") - 1
    removed_before = np.concatenate([[0], np.cumsum(np.bincount(loop_rows, minlength=graph.num_nodes))])
    xadj = (graph.indptr - removed_before).astype(idx_t)
    return xadj, np.delete(graph.indices, loops).astype(idx_t)


def sampled_adjacency(graph: Graph, idx_t, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(xadj, adjncy)`` of a seeded uniform sample of ``graph``'s undirected edges: each
    edge {u, v}, u != v, is kept with probability ``fraction``, in both directions, so the
    sample stays symmetric as METIS requires. Self loops are dropped as in
    :func:`metis_adjacency`."""
    n = graph.num_nodes
    row_ids = np.repeat(np.arange(n, dtype=graph.indices.dtype), graph.in_degree)
    upper = np.flatnonzero(graph.indices > row_ids)
    upper = upper[np.random.default_rng(seed).random(len(upper), dtype=np.float32) < fraction]
    low, high = row_ids[upper].astype(np.int64), graph.indices[upper].astype(np.int64)
    del row_ids, upper  # freed before the keys and METIS's own copies take their place
    keys = np.concatenate([low * n + high, high * n + low])
    del low, high
    keys.sort()
    xadj = np.concatenate([[0], np.cumsum(np.bincount(keys // n, minlength=n))]).astype(idx_t)
    return xadj, (keys % n).astype(idx_t)


def partition_graph(graph: Graph, num_parts: int, constraints=PARTITION_CONSTRAINTS, seed: int = 0,
                    edge_fraction: float = 1.0, separate_constraints: bool = False) -> Partition:
    """METIS k-way partition of ``graph`` into ``num_parts`` parts.

    Args:
        graph: the prepared graph.
        num_parts: P, between 1 and the number of nodes.
        constraints: vertex weights to balance (:data:`supergcn.naming.PARTITION_CONSTRAINTS`),
            combined into one (see the module docstring).
        seed: METIS's random seed (and the edge sample's).
        edge_fraction: below 1, METIS sees only this seeded fraction of the undirected
            edges (:func:`sampled_adjacency`). METIS keeps every level of its coarsening,
            and on graphs whose edges hardly merge as vertices pair up its memory is about
            levels x 16 bytes per adjacency entry (see the module docstring); sampling
            trades cut quality for that memory. 1 partitions the whole graph.
        separate_constraints: balance each constraint on its own (METIS's ``ncon``),
            through the METIS library itself (:mod:`supergcn.partition.libmetis`), instead
            of pymetis with the constraints folded into one weight.

    Returns:
        The :class:`Partition`: a part id per node and the contiguous renumbering.

    Raises:
        SuperGCNError: ``num_parts`` is out of range or a constraint is unknown.
    """
    import pymetis

    if not 0 < edge_fraction <= 1:
        raise SuperGCNError(f"the edge fraction METIS sees must be in (0, 1], got {edge_fraction}",
                            "pass --edge-fraction in (0, 1]")
    _check_num_parts(graph, num_parts)
    if num_parts == 1:
        return Partition(np.zeros(graph.num_nodes, dtype=np.int32), 1)
    check_neighbour_ids(graph)  # KaMinPar's file is written by a pass that checks them
    if separate_constraints and constraints:
        from supergcn.partition.libmetis import load_metis, part_graph_kway

        idx_t = load_metis()[1]  # the library's own integer type
    else:
        idx_t = pymetis.zero_copy_dtype()  # METIS's idx_t: arrays of it reach METIS without a copy
    xadj, adjncy = (metis_adjacency(graph, idx_t) if edge_fraction == 1
                    else sampled_adjacency(graph, idx_t, edge_fraction, seed))
    if separate_constraints and constraints:
        # A constraint that weighs nothing anywhere (no training nodes) has nothing to balance.
        active = [w for w in constraint_weights(graph, constraints).values() if w.sum() > 0]
        if not active:
            raise SuperGCNError(f"every constraint ({', '.join(constraints)}) weighs zero on every node of "
                                f"{graph.name}", "add the nodes constraint, or leave partition.constraints empty")
        parts = part_graph_kway(xadj, adjncy, np.stack(active, axis=1), num_parts, seed)
        return _nonempty(Partition(parts, num_parts), "METIS", graph)
    vweights = combined_weight(constraint_weights(graph, constraints)).astype(idx_t) if constraints else None
    result = pymetis.part_graph(num_parts, adjacency=pymetis.CSRAdjacency(xadj, adjncy), vweights=vweights,
                                options=pymetis.Options(seed=seed), recursive=False)
    return _nonempty(Partition(np.asarray(result.vertex_part, dtype=np.int32), num_parts), "METIS", graph)


def _check_num_parts(graph: Graph, num_parts: int) -> None:
    if num_parts < 1:
        raise SuperGCNError(f"number of parts must be at least 1, got {num_parts}", "pass --parts 1 or more")
    if num_parts > graph.num_nodes:
        raise SuperGCNError(f"cannot split {graph.num_nodes} nodes into {num_parts} parts",
                            "use P <= number of nodes")


def _nonempty(partition: Partition, engine: str, graph: Graph) -> Partition:
    if np.any(partition.sizes == 0):
        raise SuperGCNError(f"{engine} left a part empty for P={partition.num_parts} on {graph.num_nodes} nodes",
                            "use fewer parts for this graph")
    return partition


def edge_cut(graph: Graph, parts: np.ndarray) -> int:
    """Undirected edges whose endpoints lie in different parts (counted a block of rows at
    a time, so no array as long as the adjacency is made)."""
    cut = 0
    for _, _, rows, indices in adjacency_blocks(graph):
        cut += int(np.count_nonzero(parts[rows] != parts[indices]))
    return cut // 2


def part_totals(graph: Graph, partition: Partition) -> dict[str, np.ndarray]:
    """Per part: its nodes, its edges (the in-degrees of its nodes) and its training nodes."""
    return {name: np.bincount(partition.parts, weights=weight, minlength=partition.num_parts).astype(np.int64)
            for name, weight in (("nodes", None), ("edges", graph.in_degree), ("train_nodes", graph.train_mask))}


def balance_report(totals: dict[str, np.ndarray]) -> dict:
    """Max/mean imbalance of each of :func:`part_totals` (None where a total is zero)."""
    return {name: {"imbalance_max_over_mean": float(per_part.max() / per_part.mean()) if per_part.sum() > 0 else None}
            for name, per_part in totals.items()}


def read_part_totals(directory: str | Path) -> dict[str, np.ndarray]:
    """A partition directory's :func:`part_totals`, as written beside ``parts.npy``."""
    with load_array(Path(directory), _TOTALS_FILE.removesuffix(".npz"), "partition", suffix=".npz") as arrays:
        return {name: arrays[name] for name in arrays.files}


@dataclass(frozen=True)
class Engine:
    """Which partitioner runs and how: ``metis`` (pymetis, one thread) or ``kaminpar``
    (:mod:`supergcn.partition.kaminpar`, ``threads`` threads, ``preset`` up to k = 1,024
    and ``large_k_preset`` beyond)."""

    name: str = "metis"
    threads: int = 1
    preset: str = "terapart"
    large_k_preset: str = "terapart-largek"
    separate_constraints: bool = False

    def describe(self, num_parts: int, constraints=PARTITION_CONSTRAINTS) -> dict:
        """The manifest's record of the engine as it ran for ``num_parts``."""
        if num_parts == 1:
            return {"name": "single part"}
        if self.name == "metis" and self.separate_constraints and constraints:
            return {"name": "metis", "method": "METIS library k-way, one constraint per weight", "threads": 1}
        if self.name == "metis":
            return {"name": "metis", "method": "pymetis k-way, combined vertex weight", "threads": 1}
        from supergcn.partition.kaminpar import preset_for
        return {"name": "kaminpar", "method": "KaMinPar, combined vertex weight capped at a part's share",
                "threads": self.threads,
                "preset": preset_for(num_parts, self.preset, self.large_k_preset)}


def save_partition(partition: Partition, graph: Graph, graph_hash: str, out_dir: str | Path,
                   constraints, seconds: float, edge_fraction: float = 1.0, engine: Engine = Engine(),
                   empty_parts_filled: int = 0) -> dict:
    totals = part_totals(graph, partition)
    described = engine.describe(partition.num_parts, constraints)
    if empty_parts_filled:
        described["empty_parts_filled"] = empty_parts_filled
    manifest = {
        "format": PARTITION_FORMAT,
        "graph": graph.name,
        "graph_hash": graph_hash,
        "num_parts": partition.num_parts,
        "engine": described,
        "constraints": list(constraints),
        "metis_edge_fraction": edge_fraction if engine.name == "metis" else None,
        "edge_cut": edge_cut(graph, partition.parts),
        "num_edges_undirected": graph.num_undirected_edges,
        "balance": balance_report(totals),
        "partition_hash": partition.content_hash(),
        "seconds": seconds,
    }
    with atomic_output_dir(out_dir) as staging:
        np.save(staging / "parts.npy", partition.parts)
        np.savez(staging / _TOTALS_FILE, **totals)
        manifest["row_hashes_hash"] = write_rank_rows(graph, partition.offsets, partition.new_to_old, staging)
        manifest["peak_memory_mib"] = peak_memory_mib()
        write_json(staging / "partition.json", manifest)
    return manifest


def read_partition_manifest(directory: str | Path, graph_hash: str | None = None) -> dict:
    """``partition.json`` (a few hundred bytes whatever P), refusing a partition of another
    format or, when ``graph_hash`` is given, of another graph."""
    directory = Path(directory)
    manifest = read_json(directory / "partition.json", "partition")
    if manifest.get("format") != PARTITION_FORMAT:
        raise SuperGCNError(f"{directory} is not a partition of this supergcn version "
                            f"(format {manifest.get('format')!r}, expected {PARTITION_FORMAT!r})",
                            "rerun `supergcn partition`")
    if graph_hash is not None and manifest["graph_hash"] != graph_hash:
        raise SuperGCNError(f"partition {directory} was built from a different graph (hash {manifest['graph_hash']}, "
                            f"graph has {graph_hash})", "rerun `supergcn partition` on this graph")
    return manifest


def load_partition(directory: str | Path, graph_hash: str | None = None,
                   num_nodes: int | None = None) -> tuple[Partition, dict]:
    """Load a partition, refusing one built from a different graph when ``graph_hash`` is
    given, and one whose part ids do not fit it: not one per node (of ``num_nodes``, when
    given), outside 0..P-1, or leaving a part empty (a manifest rewritten to match)."""
    directory = Path(directory)
    manifest = read_partition_manifest(directory, graph_hash)
    partition = Partition(load_array(directory, "parts", "partition"), manifest["num_parts"])
    if partition.content_hash() != manifest["partition_hash"]:
        raise SuperGCNError(f"{directory}/parts.npy does not match its manifest (modified or damaged)",
                            "rerun `supergcn partition`")
    parts, num_parts = partition.parts, partition.num_parts
    problem = None
    if parts.ndim != 1 or parts.dtype.kind not in "iu":
        problem = f"is {parts.dtype}{list(parts.shape)}, not one integer part id per node"
    elif num_nodes is not None and len(parts) != num_nodes:
        problem = f"holds {len(parts):,} part ids for a graph of {num_nodes:,} nodes"
    elif len(parts) and (int(parts.min()) < 0 or int(parts.max()) >= num_parts):
        problem = f"holds part ids from {int(parts.min())} to {int(parts.max())}, outside 0..{num_parts - 1}"
    elif (partition.sizes == 0).any():
        problem = f"leaves {int((partition.sizes == 0).sum())} of its {num_parts} parts empty"
    if problem is not None:
        raise SuperGCNError(f"{directory}/parts.npy {problem}: the partition contradicts its manifest or its graph",
                            "delete the partition directory and rerun `supergcn partition`")
    return partition, manifest


def run_partition(graph: Graph, graph_hash: str, num_parts: int, out_dir, constraints=PARTITION_CONSTRAINTS,
                  seed: int = 0, edge_fraction: float = 1.0, engine: Engine = Engine()) -> dict:
    """Partition ``graph`` with ``engine`` and write ``out_dir`` atomically.

    Returns:
        The manifest written as ``partition.json``: graph hash, partition hash, the engine
        (and its preset and threads), the edge fraction METIS saw, edge cut (of the whole
        graph), the imbalance of nodes / edges / training nodes (their per-part totals are
        in ``part_totals.npz``), seconds, peak memory.
    """
    started = time.perf_counter()
    if engine.name == "kaminpar" and engine.separate_constraints:
        raise SuperGCNError("KaMinPar balances one weight: it cannot keep the constraints separate",
                            "set partition.separate_constraints to false, or partition.engine to metis")
    if engine.name == "kaminpar" and edge_fraction != 1:
        raise SuperGCNError("KaMinPar partitions the whole graph: an edge fraction is for METIS",
                            "set partition.edge_fraction to 1 (--edge-fraction 1), or partition.engine to metis")
    filled = 0
    if engine.name == "metis" or num_parts == 1:
        partition = partition_graph(graph, num_parts, constraints, seed, edge_fraction, engine.separate_constraints)
    elif engine.name == "kaminpar":
        partition, filled = kaminpar_partition(graph, num_parts, constraints, seed, engine, Path(out_dir))
    else:
        raise SuperGCNError(f"unknown partition engine {engine.name!r}",
                            f"choose one of {', '.join(PARTITION_ENGINES)}")
    return save_partition(partition, graph, graph_hash, out_dir, constraints, time.perf_counter() - started,
                          edge_fraction, engine, filled)


def kaminpar_partition(graph: Graph, num_parts: int, constraints, seed: int, engine: Engine,
                       out_dir: Path) -> tuple[Partition, int]:
    """KaMinPar's k-way partition with the constraints folded into one weight, as for METIS,
    and how many parts it left empty and were given a node; its graph file is written beside
    ``out_dir`` and removed."""
    from supergcn.partition.kaminpar import fill_empty_parts, kaminpar_parts, preset_for

    _check_num_parts(graph, num_parts)
    weights = capped_weight(combined_weight(constraint_weights(graph, constraints)), num_parts) if constraints else None
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Named as atomic_output_dir's staging directories, so the next attempt after a killed
    # job removes a left-over file (tens of GB at papers100M's size).
    parts = kaminpar_parts(graph, num_parts, weights, seed, engine.threads,
                           preset_for(num_parts, engine.preset, engine.large_k_preset), out_dir.parent,
                           f".{out_dir.name}.tmp-kaminpar-")
    filled = fill_empty_parts(parts, num_parts, weights)
    return Partition(parts, num_parts), filled
