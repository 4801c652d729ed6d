"""``--precision``: what ``auto`` picks and why, the CPU's bfloat16 flags, what a bf16 run
refuses, and a bf16 model held to float32 PyG at bfloat16's tolerance."""

import dataclasses

import numpy as np
import pytest
import torch

from supergcn.methods import method_cards
from supergcn.models import card
from supergcn.naming import GNN_MODELS
from supergcn.train import precision as module
from supergcn.train.config import TrainConfig
from supergcn.train.precision import ACCURACY_HELD, agreed, bfloat16_instructions, choose

PATHS = {name: "x" for name in ("graph", "partition", "plan", "out")}
SAPPHIRE_RAPIDS = ["amx_bf16", "avx512_bf16"]


@pytest.mark.parametrize("asked", ["fp32", "bf16"])
def test_fp32_and_bf16_are_taken_as_asked_whatever_the_cpu(asked):
    picked = choose(asked, "gat", instructions=[])
    assert (picked.picked, picked.reason) == (asked, "asked for")


def with_auto(monkeypatch, model: str, allowed: bool) -> None:
    changed = dataclasses.replace(card(model), bfloat16_auto=allowed)
    monkeypatch.setattr(module, "card", lambda name: changed if name == model else card(name))


def test_auto_picks_bf16_where_the_cpu_has_it_and_the_model_card_allows_it(monkeypatch):
    with_auto(monkeypatch, "sage", True)
    picked = choose("auto", "sage", instructions=SAPPHIRE_RAPIDS)
    assert picked.bfloat16 and "amx_bf16, avx512_bf16" in picked.reason and f"{ACCURACY_HELD} points" in picked.reason


def test_auto_picks_fp32_on_a_cpu_without_bfloat16(monkeypatch):
    """Fugaku's A64FX: half precision, but no bfloat16."""
    with_auto(monkeypatch, "sage", True)
    picked = choose("auto", "sage", instructions=[])
    assert picked.picked == "fp32" and picked.reason == "this CPU has no bfloat16 instructions"


@pytest.mark.parametrize("instructions", [
    ["avx512_bf16"],  # AMD Zen 4, or a Xeon whose hypervisor hides AMX
    ["bf16", "svebf16"],  # Graviton 3: not measured
])
def test_auto_picks_fp32_where_bf16_was_not_measured_faster(monkeypatch, instructions):
    """bfloat16 arithmetic without AMX's tiles: the bf16 epoch ran slower than fp32's."""
    with_auto(monkeypatch, "sage", True)
    picked = choose("auto", "sage", instructions=instructions)
    assert picked.picked == "fp32", picked
    assert f"has {', '.join(instructions)} but not amx_bf16" in picked.reason and "docs/results.md" in picked.reason


class Votes:
    """A communicator whose all-reduce sums what every rank votes."""

    def __init__(self, votes):
        self.votes, self.size = votes, len(votes)

    def allreduce_sum(self, mine):
        return np.array([sum(self.votes)], dtype=mine.dtype)


def test_a_job_computes_in_bf16_only_where_every_rank_picked_it(monkeypatch):
    with_auto(monkeypatch, "sage", True)
    on_amx, elsewhere = choose("auto", "sage", instructions=SAPPHIRE_RAPIDS), choose("auto", "sage", instructions=[])
    assert agreed(on_amx, Votes([1, 1, 1])) == on_amx
    mixed = agreed(on_amx, Votes([1, 0, 1]))
    assert mixed.picked == "fp32" and mixed.reason == "1 of 3 ranks' CPUs have no amx_bf16"
    assert agreed(elsewhere, Votes([1, 0, 1])) == elsewhere


def test_auto_picks_fp32_for_a_model_whose_bf16_accuracy_did_not_hold(monkeypatch):
    with_auto(monkeypatch, "gat", False)
    picked = choose("auto", "gat", instructions=SAPPHIRE_RAPIDS)
    assert picked.picked == "fp32" and "GAT" in picked.reason and "docs/results.md" in picked.reason


def test_auto_picks_fp32_for_a_method_that_computes_in_float32(monkeypatch):
    with_auto(monkeypatch, "sage", True)
    method = next(method for method in method_cards() if "bf16" not in method.precisions)
    picked = choose("auto", "sage", method, instructions=SAPPHIRE_RAPIDS)
    assert picked.picked == "fp32" and picked.reason == f"{method.title} computes in float32"


@pytest.mark.parametrize("text, flags", [
    ("flags\t\t: fpu sse avx512f avx512_bf16 amx_bf16 amx_tile\n", ["amx_bf16", "avx512_bf16"]),  # Sapphire Rapids
    ("flags\t\t: fpu sse avx512f avx512_bf16 avx512_fp16\n", ["avx512_bf16"]),  # Zen 4
    ("Features\t: fp asimd sve fphp asimdhp\n", []),  # A64FX: FP16, no bfloat16
    ("Features\t: fp asimd sve sve2 bf16 svebf16 i8mm\n", ["bf16", "svebf16"]),  # Graviton 3
])
def test_bfloat16_instructions_are_read_from_cpuinfo(tmp_path, text, flags):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\n" + text)
    assert bfloat16_instructions(tmp_path / "cpuinfo") == flags
    assert bfloat16_instructions(tmp_path / "missing") == []


def test_bf16_with_a_gemm_dtype_is_refused_as_unread():
    found = TrainConfig(**PATHS, precision="bf16", dense_dtype="bfloat16").conflicts()
    assert any("--dense-dtype bfloat16 is not read" in m and "--precision fp32" in m for m in found), found
    assert TrainConfig(**PATHS, precision="fp32", dense_dtype="bfloat16").conflicts() == []


@pytest.fixture(scope="module")
def one_rank():
    """synthetic-tiny on one rank: its features in the plan's order, the rank's ops with
    float32 gradients and with bfloat16 ones (a bf16 run's), and PyG's edges."""
    from mpi4py import MPI

    from supergcn.data.datasets import prepare_dataset
    from supergcn.distributed.comm import Communicator
    from supergcn.distributed.graph_ops import GraphOps
    from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
    from supergcn.distributed.timing import PhaseTimer
    from supergcn.partition.metis import partition_graph
    from supergcn.testing.plans import build_plans
    from supergcn.testing.pyg import edge_index_of

    graph = prepare_dataset("synthetic-tiny")
    plan = build_plans(graph, partition_graph(graph, 1), "hybrid")[0][0]

    def ops(bfloat16: bool) -> GraphOps:
        settings = ExchangeSettings(bfloat16_gradients=bfloat16)
        return GraphOps(RankOperators(plan, Communicator(MPI.COMM_SELF), PhaseTimer(), settings=settings))
    return graph, plan, ops(False), ops(True), edge_index_of(graph)


def forward_and_gradients(model, x, ops_or_edges, labels, order=None):
    """The log-probabilities (in the graph's order) and each parameter's gradient of their
    mean NLL over every node."""
    model.zero_grad()
    out = model(x, ops_or_edges)
    if order is not None:  # ours come in the plan's order
        out = torch.empty_like(out).index_copy_(0, torch.from_numpy(order).long(), out)
    torch.nn.functional.nll_loss(out, labels).backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def relative_error(got, expected) -> float:
    return float((got - expected).norm() / expected.norm())


@pytest.mark.parametrize("model", GNN_MODELS)
def test_a_bf16_model_stays_within_bfloat16s_rounding_of_float32_pyg(one_rank, model):
    """The same weights, PyG in float32 against ours in fp32 and in bf16 (bfloat16 features,
    GEMMs and activations; float32 sums; bfloat16 gradients into the transposed gathers),
    one forward and backward pass: fp32 is PyG's to 1e-4; bf16's log-probabilities (within
    1 %) and every parameter's gradient (within 10 %, relative norms) are within bfloat16's
    reach and not equal to fp32's (the precision really is lower)."""
    from supergcn.testing.pyg import PyGModel, copy_weights
    from supergcn.train.gnn import GNN

    graph, plan, fp32_ops, bf16_ops, edges = one_rank
    features = torch.from_numpy(np.asarray(graph.features)).float()
    labels = torch.from_numpy(np.asarray(graph.labels)).long()
    torch.manual_seed(0)
    shape = (features.shape[1], 32, graph.num_classes)
    ours = GNN(model, *shape, dropout=0.0, heads=2)
    low = GNN(model, *shape, dropout=0.0, heads=2, dense_dtype="bfloat16", row_dtype="bfloat16")
    low.load_state_dict(ours.state_dict())
    pyg = PyGModel(model, *shape, dropout=0.0, heads=2)
    copy_weights(ours, pyg)
    for net in (ours, low, pyg):
        net.eval()
    fp32_ops.begin_pass(training=False), bf16_ops.begin_pass(training=False)
    x = features[torch.from_numpy(plan.owned_old_ids).long()]
    expected, expected_grads = forward_and_gradients(pyg, features, edges, labels)
    exact, exact_grads = forward_and_gradients(ours, x, fp32_ops, labels, plan.owned_old_ids)
    rounded, rounded_grads = forward_and_gradients(low, x.to(torch.bfloat16), bf16_ops, labels, plan.owned_old_ids)
    np.testing.assert_allclose(exact, expected, rtol=1e-4, atol=1e-4)
    assert rounded.dtype == torch.float32 and not torch.equal(rounded, exact)
    assert relative_error(rounded, expected) < 1e-2
    for name, got, fp32, want in zip(dict(ours.named_parameters()), rounded_grads, exact_grads, expected_grads):
        assert relative_error(fp32, want) < 1e-4, name
        # bfloat16 GEMMs of bfloat16 gradients: 2^-8 per rounding, summed over layers (seen: up to 0.07)
        assert relative_error(got, want) < 0.1, name


def test_a_study_at_auto_whose_variants_would_pick_differently_is_refused(monkeypatch):
    from supergcn.train.precision import study_conflicts

    with_auto(monkeypatch, "sage", True)
    method = next(method for method in method_cards() if "bf16" not in method.precisions)
    runs = [("hybrid-fp32-nolp", "sage", None), ("pre-fp32-nolp-x", "sage", method)]
    [found] = study_conflicts("auto", runs)
    assert "hybrid-fp32-nolp in bf16 and pre-fp32-nolp-x in fp32" in found and "training.precision: fp32" in found
    assert study_conflicts("fp32", runs) == [] and study_conflicts("auto", runs[:1]) == []


def test_the_model_cards_pick_bf16_where_the_measured_accuracy_held():
    """Each card's ``bfloat16_auto`` is what docs/results.md's accuracy table says: True
    exactly where every measured variant of the model lost at most ACCURACY_HELD points
    (a variant's model is its name's first word; a model without rows is not picked)."""
    import re

    from conftest import REPO

    page = (REPO / "docs" / "results.md").read_text()
    section = page.split("## bfloat16 against float32: accuracy", 1)[1].split("\n## ", 1)[0]
    losses = {}
    for variant, loss in re.findall(r"^\| \w+ \| \d+ \| ([\w-]+) \| [^|]+\| [^|]+\| ([+-]\d+\.\d+) ±", section, re.M):
        model = variant.split("-")[0]
        losses[model] = max(losses.get(model, -1.0), float(loss))
    assert set(losses) == {"sage", "gcn", "gat"}, losses
    for model in GNN_MODELS:
        assert card(model).bfloat16_auto == (model in losses and losses[model] <= ACCURACY_HELD), model
