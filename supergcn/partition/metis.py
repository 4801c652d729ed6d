"""The METIS engine: k-way partitions with SuperGCN's vertex weights.

The installed ``pymetis`` cannot pass several constraints: its wrapper derives ``ncon``
from the length of the weight list divided by ``len(xadj) = n + 1``, which is 1 for
any ``ncon * n`` weights, and METIS then reads only the first ``n`` entries of the
interleaved list (see ``tests/partition/test_metis.py::test_pymetis_ignores_multiconstraint``,
which measures it). By default METIS therefore balances each constraint on its own
(``ncon`` weights per vertex, the paper's setting) through the METIS library itself
(:mod:`supergcn.partition.libmetis`, PyPI's ``cmeel-metis``); with
``separate_constraints=False`` the constraints are folded into one integer weight
(:func:`supergcn.partition.partition.combined_weight`) for pymetis, whose 64-bit build also
counts past the library's 2^31.

Memory. METIS keeps every level of its coarsening hierarchy, each with an adjacency and
an edge-weight array of its ``idx_t`` (64-bit in pymetis's build): about 16 bytes per
adjacency entry per level. On graphs whose edges rarely merge when vertices pair up
(random-like ones such as the planted-partition presets), every level keeps nearly all
entries: METIS's own report on products-shaped 1/8 scale (15.5 M entries, P = 8) shows
7 levels of 15.5 M .. 10.2 M entries, so METIS needs about 7 x 16 = 110 bytes per entry,
some 13 GiB at full products scale. ``edge_fraction`` < 1 hands METIS a seeded uniform
sample of the edges instead (the cut and balance are still measured on the whole graph;
what the sample costs in cut, measured at 1/8 products scale: docs/results.md,
"Partitioning").
"""

from __future__ import annotations

import numpy as np

from supergcn.data.graph import Graph, check_neighbour_ids
from supergcn.errors import SuperGCNError
from supergcn.naming import PARTITION_CONSTRAINTS
from supergcn.partition.partition import (
    Partition,
    check_num_parts,
    combined_weight,
    constraint_weights,
    nonempty,
)
from supergcn.progress import running


def metis_adjacency(graph: Graph, idx_t) -> tuple[np.ndarray, np.ndarray]:
    """``(xadj, adjncy)`` of ``graph`` without its self loops (METIS wants none), of METIS's
    integer type ``idx_t``, so that pymetis passes them on without copying them again.

    A self loop is stored once, in its own row: removing it from row v shifts every later
    row start by the loops in rows 0..v.

    Args:
        graph: the prepared graph.
        idx_t: METIS's integer dtype.

    Returns:
        ``(xadj, adjncy)``: n + 1 row pointers and the neighbour ids, both ``idx_t``.
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
    :func:`metis_adjacency`.

    Args:
        graph: the prepared graph.
        idx_t: METIS's integer dtype.
        fraction: the probability of keeping an edge.
        seed: seed of the sample.

    Returns:
        ``(xadj, adjncy)`` of the sample, both ``idx_t``, rows sorted.
    """
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
                    edge_fraction: float = 1.0, separate_constraints: bool = True) -> Partition:
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
        separate_constraints: balance each constraint on its own (METIS's ``ncon``, the
            paper's setting, the default), through the METIS library itself
            (:mod:`supergcn.partition.libmetis`); False folds them into one weight for
            pymetis.

    Returns:
        The :class:`Partition`: a part id per node and the contiguous renumbering.

    Raises:
        SuperGCNError: ``num_parts`` or ``edge_fraction`` is out of range, a constraint is
            unknown, every constraint weighs zero (``separate_constraints``), the graph is
            too large for the METIS library's 32-bit integers, a neighbour id lies outside
            the graph's nodes, or METIS left a part empty.
    """
    import pymetis

    if not 0 < edge_fraction <= 1:
        raise SuperGCNError(f"the edge fraction METIS sees must be in (0, 1], got {edge_fraction}",
                            "pass --edge-fraction in (0, 1]")
    check_num_parts(graph, num_parts)
    if num_parts == 1:
        return Partition(np.zeros(graph.num_nodes, dtype=np.int32), 1)
    check_neighbour_ids(graph)  # KaMinPar's file is written by a pass that checks them
    if separate_constraints and constraints:
        from supergcn.partition.libmetis import check_fits, load_metis, part_graph_kway

        idx_t = load_metis()[1]  # the library's own integer type
        check_fits(idx_t, graph.num_edges, graph.num_nodes)  # before the adjacency is copied for it
    else:
        idx_t = pymetis.zero_copy_dtype()  # METIS's idx_t: arrays of it reach METIS without a copy
    with running("partition: METIS's copy of the adjacency"):
        xadj, adjncy = (metis_adjacency(graph, idx_t) if edge_fraction == 1
                        else sampled_adjacency(graph, idx_t, edge_fraction, seed))
    if separate_constraints and constraints:
        # A constraint that weighs nothing anywhere (no training nodes) has nothing to balance.
        active = [w for w in constraint_weights(graph, constraints).values() if w.sum() > 0]
        if not active:
            raise SuperGCNError(f"every constraint ({', '.join(constraints)}) weighs zero on every node of "
                                f"{graph.name}", "add the nodes constraint, or leave partition.constraints empty")
        with running(f"partition: METIS k-way into {num_parts:,} parts, {len(active)} constraints"):
            parts = part_graph_kway(xadj, adjncy, np.stack(active, axis=1), num_parts, seed)
        return nonempty(Partition(parts, num_parts), "METIS", graph)
    vweights = combined_weight(constraint_weights(graph, constraints)).astype(idx_t) if constraints else None
    with running(f"partition: METIS k-way into {num_parts:,} parts, one combined weight"):
        result = pymetis.part_graph(num_parts, adjacency=pymetis.CSRAdjacency(xadj, adjncy), vweights=vweights,
                                    options=pymetis.Options(seed=seed), recursive=False)
    return nonempty(Partition(np.asarray(result.vertex_part, dtype=np.int32), num_parts), "METIS", graph)
