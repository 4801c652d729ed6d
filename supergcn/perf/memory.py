"""A rank's memory while it trains, term by term, in float32 and in bfloat16 (``--precision``).

For a rank that owns ``n`` nodes, holds ``e`` adjacency entries (its local, pre and remote
CSRs) and receives ``h`` boundary rows per layer, training a model of widths
``F -> H -> ... -> C`` (:class:`~supergcn.perf.methods.Layers`), with ``s`` bytes per stored
value (4 in fp32, 2 in bf16: features, activations and what backward keeps are stored in
bfloat16 under ``--precision bf16``; parameters, optimizer, the gathers' sums, gradients and
the exchange's rows stay float32):

* adjacency: ``e * ENTRY_BYTES + n * NODE_BYTES`` — each entry's int64 column id in the
  rank's plan, in the gather's CSR and in its transpose (the backward's); each node's int64
  row pointers (the plan's two, the gathers' and transposes' four), in-degree and int32
  original id (the arrays :class:`~supergcn.distributed.rank_operators.RankOperators` holds);
* features: ``n * F * s``;
* saved for backward: ``a_0 + a_n * n + a_e * e`` bytes, where the shares are *traced*, not
  written down: the model's forward pass runs on three small ring lattices of the real
  widths (two sizes, two degrees) under :func:`torch.autograd.graph.saved_tensors_hooks`,
  and the bytes of every tensor autograd keeps (parameters and input excepted) are solved
  for a share kept once, per owned node and per adjacency entry;
* working rows: ``WORKING_ROWS * n * W * 4`` with ``W`` the widest layer output — at the
  backward's peak the gradient arriving at a layer, the one it returns, the transposed
  gather's output and the GEMMs' results are alive beside what autograd kept, float32 in
  either precision (the gathers sum and write float32) (:data:`WORKING_ROWS` is fitted,
  see ``benchmarks/memory.py``: not counted by a trace);
* the exchange's buffers: ``2 * h * W * 4`` (the rows sent and received by one layer's
  Alltoallv, float32, ``h`` sent as many as received in a balanced plan);
* parameters: ``4 * p * 4`` (weights, their gradients and Adam's two moments, float32).

The process itself (Python, torch, Numba's compiled kernels, MPI) is a constant measured
per machine, not modelled: :data:`PROCESS_BYTES` is this project's, measured on Linux
x86-64 (``VmRSS`` after importing the trainer). ``benchmarks/memory.py`` holds the model to
the peak resident memory of real runs.

The preprocessing budget (:func:`preprocessing_bytes`) is what ``prepare`` writes and a
whole-graph step (partitioning, planning) holds: the symmetric CSR (int64 pointers and
ids) and the float32 features.
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from supergcn.perf.methods import Layers

#: Bytes per adjacency entry a rank holds: its int64 column id in the plan, the gather's CSR and its transpose.
ENTRY_BYTES = 3 * 8
#: Bytes per owned node: six int64 row pointers, the int64 in-degree and the int32 original id.
NODE_BYTES = 6 * 8 + 8 + 4
#: A rank before it loads anything: Python, torch, Numba's kernels, MPI (VmRSS, Linux x86-64).
PROCESS_BYTES = 330 * 2**20
#: float32 n x W rows alive beside the saved ones at the backward's peak: fitted to the peak
#: resident memory of synthetic-arxiv's P = 1 rank (SAGE 3 x 256, fp32, glibc), benchmarks/memory.py.
WORKING_ROWS = 5
#: Bytes per stored value at each ``--precision``.
STORED_BYTES = {"fp32": 4, "bf16": 2}
#: The traced lattices: (nodes, degree).
TRACED = ((240, 4), (240, 12), (400, 4))


@dataclass(frozen=True)
class RankShape:
    """What one rank owns and receives.

    Args:
        nodes: owned nodes, n.
        entries: adjacency entries in its CSRs, e.
        halo_rows: boundary rows it receives per layer, h.
    """

    nodes: int
    entries: int
    halo_rows: int


def _parameters(model: str, layers: Layers, heads: int) -> int:
    """The model's float32 parameter count (built once, at the real widths)."""
    from supergcn.train.gnn import GNN

    net = GNN(model, layers.in_features, layers.hidden, layers.out_features, layers.num_layers, heads=heads)
    return sum(p.numel() for p in net.parameters())


def _saved_bytes(model: str, layers: Layers, precision: str, heads: int, nodes: int, degree: int) -> tuple[int, int]:
    """Bytes autograd keeps over one training forward pass on a ``degree``-regular ring lattice
    of ``nodes`` nodes, on one rank, and the lattice's adjacency entries."""
    import torch
    from mpi4py import MPI

    from supergcn.data.graph import build_graph
    from supergcn.distributed.comm import Communicator
    from supergcn.distributed.graph_ops import GraphOps
    from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
    from supergcn.distributed.timing import PhaseTimer
    from supergcn.partition.partition import Partition
    from supergcn.plan.builder import plan_ranks
    from supergcn.train.gnn import GNN

    src = np.repeat(np.arange(nodes), degree // 2)
    dst = (src + np.tile(np.arange(1, degree // 2 + 1), nodes)) % nodes
    rng = np.random.default_rng(0)
    mask = np.zeros(nodes, dtype=bool)
    graph = build_graph("traced", src, dst, rng.standard_normal((nodes, layers.in_features)),
                        np.arange(nodes) % layers.out_features, ~mask, mask, mask)
    plans = []
    with tempfile.TemporaryDirectory(prefix="supergcn-traced-") as scratch:
        plan_ranks(graph, Partition(np.zeros(nodes, dtype=np.int32), 1), "hybrid", scratch, plans.append,
                   Path(scratch) / "pairs.npz")
    plan = plans[0]
    bfloat16 = precision == "bf16"
    ops = GraphOps(RankOperators(plan, Communicator(MPI.COMM_SELF), PhaseTimer(),
                                 settings=ExchangeSettings(bfloat16_gradients=bfloat16)))
    dtype = "bfloat16" if bfloat16 else "float32"
    net = GNN(model, layers.in_features, layers.hidden, layers.out_features, layers.num_layers,
              dense_dtype=dtype, row_dtype=dtype, heads=heads)
    net.train()
    x = torch.from_numpy(graph.features[plan.owned_old_ids]).to(getattr(torch, dtype))
    excluded = {p.untyped_storage().data_ptr() for p in net.parameters()} | {x.untyped_storage().data_ptr()}
    kept: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in excluded:
            kept[storage.data_ptr()] = max(kept.get(storage.data_ptr(), 0), storage.nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        net(x, ops)
    return sum(kept.values()), int(graph.indptr[-1])


@functools.lru_cache(maxsize=None)
def saved_shares(model: str, layers: Layers, precision: str, heads: int = 1) -> tuple[float, float, float]:
    """``(a_0, a_n, a_e)``: the bytes autograd keeps in a training forward pass, once, per
    owned node and per adjacency entry (module docstring), solved from the traced lattices
    (:data:`TRACED`: two sizes, two degrees)."""
    traced = [(1.0, nodes, *_saved_bytes(model, layers, precision, heads, nodes, degree)[::-1])
              for nodes, degree in TRACED]
    system = np.array([[one, nodes, entries] for one, nodes, entries, _ in traced])
    kept = np.array([bytes_ for *_, bytes_ in traced], dtype=np.float64)
    once, per_node, per_entry = np.linalg.solve(system, kept)
    return float(once), float(per_node), float(per_entry)


def rank_memory(shape: RankShape, model: str, layers: Layers, precision: str, heads: int = 1) -> dict[str, int]:
    """The bytes of each term of the module docstring for one rank, and their ``total``
    (:data:`PROCESS_BYTES` included).

    Raises:
        ValueError: an unknown ``precision``.
    """
    if precision not in STORED_BYTES:
        raise ValueError(f"unknown precision {precision!r}: choose one of {sorted(STORED_BYTES)}")
    widest = max(layers.dims[1:])
    once, per_node, per_entry = saved_shares(model, layers, precision, heads)
    terms = {
        "process": PROCESS_BYTES,
        "adjacency": shape.entries * ENTRY_BYTES + shape.nodes * NODE_BYTES,
        "features": shape.nodes * layers.in_features * STORED_BYTES[precision],
        "saved": round(once + per_node * shape.nodes + per_entry * shape.entries),
        "working": WORKING_ROWS * shape.nodes * widest * 4,
        "exchange": 2 * shape.halo_rows * widest * 4,
        "parameters": 4 * _parameters(model, layers, heads) * 4,
    }
    return {**terms, "total": sum(terms.values())}


def balanced_shape(num_nodes: int, num_entries: int, ranks: int, halo: float) -> RankShape:
    """A rank of a balanced ``ranks``-way partition that receives ``halo`` rows per owned
    node each layer, capped by the most any partition can cost it (its entries, and the
    nodes it does not own); a real plan's halo is :func:`plan_shapes`'."""
    nodes = -(-num_nodes // ranks)
    entries = -(-num_entries // ranks)
    return RankShape(nodes, entries, min(round(halo * nodes), entries, num_nodes - nodes))


def preprocessing_bytes(num_nodes: int, num_entries: int, features: int) -> dict[str, int]:
    """What ``prepare`` writes and a whole-graph step holds: the symmetric CSR (int64
    pointers and column ids) and the features in float32, and what bfloat16 features would be."""
    csr = (num_nodes + 1) * 8 + num_entries * 8
    return {"csr": csr, "features_fp32": num_nodes * features * 4, "features_bf16": num_nodes * features * 2}


def plan_shapes(partition_dir, plan_dir) -> list[RankShape]:
    """Each rank's :class:`RankShape` of a real partition and plan: its nodes and adjacency
    entries (the partition's totals) and the rows its plan has it receive per layer
    (Comm[j][i] of the plan's own strategy, PRE and POST rows)."""
    from supergcn.partition.store import read_part_totals
    from supergcn.plan.statistics import strategy_row_kinds
    from supergcn.plan.store import read_plan_manifest, read_plan_pairs

    manifest = read_plan_manifest(plan_dir)
    pre, post = strategy_row_kinds(read_plan_pairs(plan_dir), manifest["num_ranks"],
                                   manifest["strategy"])[manifest["strategy"]]
    received = (pre + post).sum(axis=0)
    totals = read_part_totals(partition_dir)
    return [RankShape(int(nodes), int(entries), int(rows))
            for nodes, entries, rows in zip(totals["nodes"], totals["edges"], received)]
