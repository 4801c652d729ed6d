"""The memory model per rank (:mod:`supergcn.perf.memory`): its traced share of what autograd
keeps, its adjacency bytes against the arrays a rank's operators hold, its terms by hand,
and a real plan's shapes."""

import numpy as np
import pytest
import torch

from supergcn.models import GNN_MODELS
from supergcn.perf import memory
from supergcn.perf.methods import Layers

LAYERS = Layers(24, 32, 5, 3)


def kept_by_autograd(model: str, graph, precision: str, heads: int) -> int:
    """Bytes autograd keeps over a training forward pass of ``model`` on ``graph`` at P = 1
    (parameters and input excepted), counted here by the test itself."""
    from mpi4py import MPI

    from supergcn.distributed.comm import Communicator
    from supergcn.distributed.graph_ops import GraphOps
    from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
    from supergcn.distributed.timing import PhaseTimer
    from supergcn.partition.partition import Partition
    from supergcn.testing.plans import build_plans
    from supergcn.train.gnn import GNN

    plan = build_plans(graph, Partition(np.zeros(graph.num_nodes, dtype=np.int32), 1), "hybrid")[0][0]
    bf16 = precision == "bf16"
    ops = GraphOps(RankOperators(plan, Communicator(MPI.COMM_SELF), PhaseTimer(),
                                 settings=ExchangeSettings(bfloat16_gradients=bf16)))
    dtype = "bfloat16" if bf16 else "float32"
    net = GNN(model, LAYERS.in_features, LAYERS.hidden, LAYERS.out_features, dense_dtype=dtype, row_dtype=dtype,
              heads=heads)
    x = torch.from_numpy(graph.features[plan.owned_old_ids]).to(getattr(torch, dtype))
    skip = {p.untyped_storage().data_ptr() for p in net.parameters()} | {x.untyped_storage().data_ptr()}
    kept = {}

    def pack(tensor):
        key = tensor.untyped_storage().data_ptr()
        if key not in skip:
            kept[key] = max(kept.get(key, 0), tensor.untyped_storage().nbytes())
        return tensor
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        net.train()(x, ops)
    return sum(kept.values())


@pytest.fixture(scope="module")
def irregular_graph():
    """500 nodes, 24 features, degrees from 0 to ~40 (not a lattice like the traced ones)."""
    from supergcn.data.graph import build_graph

    rng = np.random.default_rng(7)
    src = rng.integers(0, 500, 3000)
    dst = (src + rng.geometric(0.05, 3000)) % 500
    mask = np.zeros(500, dtype=bool)
    return build_graph("irregular", src, dst, rng.standard_normal((500, 24)), np.arange(500) % 5, ~mask, mask, mask)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("model", GNN_MODELS)
def test_the_traced_share_predicts_what_autograd_keeps_on_another_graph(irregular_graph, model, precision):
    """Solved from three lattices, the shares predict the bytes kept on an irregular graph of
    another size within 1 % (what is kept is linear in nodes and entries)."""
    heads = 4 if model == "gat" else 1
    once, per_node, per_entry = memory.saved_shares(model, LAYERS, precision, heads)
    entries = int(irregular_graph.indptr[-1])
    predicted = once + per_node * irregular_graph.num_nodes + per_entry * entries
    assert predicted == pytest.approx(kept_by_autograd(model, irregular_graph, precision, heads), rel=0.01)


@pytest.mark.parametrize("model", GNN_MODELS)
def test_bf16_keeps_less_for_backward_than_fp32(model):
    heads = 4 if model == "gat" else 1
    fp32, bf16 = (memory.saved_shares(model, LAYERS, p, heads)[1] for p in ("fp32", "bf16"))
    assert bf16 < fp32


def test_the_adjacency_terms_are_the_arrays_a_ranks_operators_hold(irregular_graph):
    """ENTRY_BYTES and NODE_BYTES against the numpy arrays reachable from a P = 1 rank's
    operators (each counted once, views by their base), within 2 %."""
    from mpi4py import MPI

    from supergcn.distributed.comm import Communicator
    from supergcn.distributed.rank_operators import RankOperators
    from supergcn.distributed.timing import PhaseTimer
    from supergcn.partition.partition import Partition
    from supergcn.testing.plans import build_plans

    def held(obj, seen, bases, depth=0) -> None:
        if id(obj) in seen or depth > 8:
            return
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj if obj.base is None or not isinstance(obj.base, np.ndarray) else obj.base
            bases[id(base)] = base.nbytes
            return
        if isinstance(obj, dict):
            children = list(obj.values())
        elif isinstance(obj, (list, tuple)):
            children = list(obj)
        else:
            children = list(getattr(obj, "__dict__", {}).values())
            children += [getattr(obj, slot, None) for slot in getattr(type(obj), "__slots__", ())]
        for child in children:
            held(child, seen, bases, depth + 1)

    plan = build_plans(irregular_graph, Partition(np.zeros(500, dtype=np.int32), 1), "hybrid")[0][0]
    operators = RankOperators(plan, Communicator(MPI.COMM_SELF), PhaseTimer())
    bases = {}
    held(operators.__dict__, set(), bases)
    modelled = memory.RankShape(500, int(irregular_graph.indptr[-1]), 0)
    expected = modelled.entries * memory.ENTRY_BYTES + modelled.nodes * memory.NODE_BYTES
    assert sum(bases.values()) == pytest.approx(expected, rel=0.02)


def test_the_terms_by_hand(monkeypatch):
    """n = 1,000, e = 10,000, h = 300, widths 24 -> 32 -> 32 -> 5: each term of the module
    docstring written out (the traced shares stubbed: 50 B once, 100 a node, 3 an entry)."""
    monkeypatch.setattr(memory, "saved_shares", lambda *args: (50.0, 100.0, 3.0))
    shape = memory.RankShape(1000, 10_000, 300)
    fp32 = memory.rank_memory(shape, "sage", LAYERS, "fp32")
    bf16 = memory.rank_memory(shape, "sage", LAYERS, "bf16")
    # SAGE's lin_l (with bias) and lin_r per layer, and two LayerNorms
    params = (24 * 32 * 2 + 32) + (32 * 32 * 2 + 32) + (32 * 5 * 2 + 5) + 2 * (2 * 32)
    assert fp32["adjacency"] == 10_000 * 24 + 1000 * 60
    assert (fp32["features"], bf16["features"]) == (1000 * 24 * 4, 1000 * 24 * 2)
    assert fp32["saved"] == 50 + 100 * 1000 + 3 * 10_000
    assert fp32["working"] == bf16["working"] == 5 * 1000 * 32 * 4
    assert fp32["exchange"] == bf16["exchange"] == 2 * 300 * 32 * 4
    assert fp32["parameters"] == 16 * params
    assert fp32["total"] == sum(v for k, v in fp32.items() if k != "total")
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        memory.rank_memory(shape, "sage", LAYERS, "fp16")


def test_a_balanced_rank_receives_its_halo_capped_by_what_a_partition_can_cost():
    assert memory.balanced_shape(1000, 8000, 4, 0.5) == memory.RankShape(250, 2000, 125)
    assert memory.balanced_shape(1000, 8000, 4, 20.0).halo_rows == 750  # the nodes it does not own
    assert memory.balanced_shape(1000, 400, 4, 20.0).halo_rows == 100  # its entries


def test_a_real_plans_shapes_are_its_ranks_nodes_entries_and_received_rows(tiny_plans):
    from supergcn.partition.store import read_part_totals
    from supergcn.plan.store import load_rank_plan

    shapes = memory.plan_shapes(tiny_plans / "P2", tiny_plans / "P2-hybrid")
    totals = read_part_totals(tiny_plans / "P2")
    assert [s.nodes for s in shapes] == list(totals["nodes"]) and [s.entries for s in shapes] == list(totals["edges"])
    for rank, shape in enumerate(shapes):
        plan = load_rank_plan(tiny_plans / "P2-hybrid", rank)
        assert shape.halo_rows == int(plan.recv_counts.sum()) > 0
