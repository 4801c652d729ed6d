"""Distributed training of every model, held to single-process PyG (``SAGEConv``,
``GCNConv``, ``GINConv``, ``GATConv``) from the same initial weights: every strategy at
P = 1, 2, 3, 5 and 7 (one MPI job per P runs them all), and at P = 3 the torch kernels,
aggregating first and clipped gradients."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from supergcn.data.graph import load_graph, save_graph
from supergcn.methods.mixgcn.exchange import epoch_transpose_values
from supergcn.models import card
from supergcn.naming import GNN_MODELS, STRATEGIES
from supergcn.partition.metis import partition_graph
from supergcn.partition.store import run_partition
from supergcn.plan.costs import row_costs
from supergcn.plan.store import read_plan_pairs, run_plan
from supergcn.report.tables import run_record
from supergcn.testing.pyg import PyGModel, copy_weights, train_baseline
from supergcn.train.gnn import GNN
from supergcn.train.metrics import read_metrics

from conftest import run_rank_job
from models_common import AGGREGATING_FIRST, CLIP, EPOCHS, HEADS, HIDDEN, LAYERS, LR, OPTIONS_AT, PARTS, runs


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The graph, its partitions and plans, each model's initial weights, and PyG's
    training from them (SAGE's also with clipped gradients)."""
    from supergcn.data.datasets import prepare_dataset

    root = tmp_path_factory.mktemp("models")
    meta = save_graph(prepare_dataset("synthetic-tiny"), root / "g")
    graph = load_graph(root / "g")
    for parts in PARTS:
        manifest = run_partition(graph, meta["hash"], parts, root / f"p{parts}")
        partition = partition_graph(graph, parts)
        for strategy in STRATEGIES:
            run_plan(graph, meta["hash"], partition, manifest["partition_hash"], strategy, root / f"p{parts}{strategy}")
    baselines = {}
    for model in GNN_MODELS:
        torch.manual_seed(3)
        ours = GNN(model, graph.features.shape[1], HIDDEN, graph.num_classes, LAYERS, dropout=0.0, heads=HEADS)
        torch.save(ours.state_dict(), root / f"init_{model}.pt")
        for clip in (0.0, CLIP) if model == "sage" else (0.0,):
            pyg = PyGModel(model, graph.features.shape[1], HIDDEN, graph.num_classes, LAYERS, dropout=0.0,
                           heads=HEADS)
            copy_weights(ours, pyg)
            baselines[model, clip] = train_baseline(graph, pyg, EPOCHS, LR, grad_clip=clip)
    return root, graph, baselines


@pytest.fixture(scope="module")
def trained(request, workspace):
    """``trained(P)`` runs the MPI job of P ranks once (the module's tests share it) and
    returns P."""
    done = set()

    def run(parts: int) -> int:
        if parts not in done:
            run_rank_job(request.path.with_name("models_job.py"), parts, timeout=300, args=[workspace[0]])
            done.add(parts)
        return parts
    return run


#: (P, strategy) of the runs under every strategy: one at P = 1, where they are the same run.
EXCHANGING = [(parts, strategy) for parts in PARTS for strategy in STRATEGIES if parts > 1 or strategy == "hybrid"]


def run_of(workspace, parts, name):
    return read_metrics(workspace[0] / f"P{parts}-{name}.jsonl"), np.load(workspace[0] / f"P{parts}-{name}.npy")


def assert_matches_pyg(workspace, parts, name):
    """The run's losses (relative 1e-5), final log-probabilities and validation loss are
    PyG's, and every rank ends with the same parameters."""
    root, graph, baselines = workspace
    options = runs(parts)[name]
    expected = baselines[options["model"], options.get("grad_clip", 0.0)]
    (header, epochs, summary), logits = run_of(workspace, parts, name)
    assert header["config"]["model"] == options["model"] and header["num_ranks"] == parts
    assert header["strategy"] == options["strategy"]
    np.testing.assert_allclose([e["loss"] for e in epochs], expected["losses"], rtol=1e-5)
    np.testing.assert_allclose(logits, expected["logits"], rtol=1e-4, atol=1e-4)
    assert summary["identical_parameters"] and len(set(summary["parameter_hash_per_rank"])) == 1
    # The validation loss is summed over ranks: PyG's final log-probabilities give the same.
    val = torch.from_numpy(np.asarray(graph.val_mask))
    pyg_val_loss = F.nll_loss(torch.from_numpy(expected["logits"])[val],
                              torch.from_numpy(np.asarray(graph.labels))[val]).item()
    assert summary["final"]["val_loss"] == pytest.approx(pyg_val_loss, rel=1e-4)
    return header, epochs


@pytest.mark.parametrize("parts, strategy", EXCHANGING)
@pytest.mark.parametrize("model", GNN_MODELS)
def test_distributed_model_matches_pyg(workspace, trained, parts, strategy, model):
    _, epochs = assert_matches_pyg(workspace, trained(parts), f"{model}-{strategy}")
    assert all(e["bytes"]["data_sent_total"] > 0 for e in epochs) or parts == 1
    # GAT's scores, maxima and sums travel beside the rows; the other models need none.
    assert all((e["bytes"]["attention_sent_total"] > 0) == (model == "gat" and parts > 1) for e in epochs)


@pytest.mark.parametrize("parts", [parts for parts in PARTS if parts > 1])
def test_int2_gat_sends_a_sixteenth_of_the_rows_and_the_same_attention_scalars(workspace, trained, parts):
    (_, fp32, _), _ = run_of(workspace, trained(parts), "gat-hybrid")
    (_, int2, _), _ = run_of(workspace, parts, "gat-hybrid-int2")
    for exact, quantized in zip(fp32, int2):
        # Two bits for 32, each peer's rows packed four to a byte (a partial byte rounds up).
        assert 15 * quantized["bytes"]["data_sent_total"] <= exact["bytes"]["data_sent_total"]
        assert 16 * quantized["bytes"]["data_sent_total"] >= exact["bytes"]["data_sent_total"]
        assert quantized["bytes"]["attention_sent_total"] == exact["bytes"]["attention_sent_total"]
        assert np.isfinite(quantized["loss"]) and quantized["loss"] == pytest.approx(exact["loss"], rel=0.05)


@pytest.mark.parametrize("parts, strategy", EXCHANGING)
def test_gat_epoch_bytes_are_what_its_row_costs_say(workspace, trained, parts, strategy):
    """A training epoch of GAT sends, in FP32, exactly its PRE rows times a PRE row's cost
    and its POST rows times a POST row's (supergcn.plan.costs): rows, scalars, scores."""
    root, graph, _ = workspace
    pairs = read_plan_pairs(root / f"p{parts}{strategy}")
    pre_cost, post_cost = row_costs(card("gat"), LAYERS, HIDDEN, HEADS, graph.num_classes)
    expected_bits = pre_cost * int(pairs["pre_rows"].sum()) + post_cost * int(pairs["post_rows"].sum())
    (_, epochs, _), _ = run_of(workspace, trained(parts), f"gat-{strategy}")
    assert all(epoch["bytes"]["sent_total"] * 8 == expected_bits for epoch in epochs)


@pytest.mark.parametrize("model", GNN_MODELS)
def test_torch_kernels_match_pyg_too(workspace, trained, model):
    header, _ = assert_matches_pyg(workspace, trained(OPTIONS_AT), f"{model}-hybrid-torch")
    assert header["config"]["kernel"] == "torch"


def test_gat_not_overlapped_matches_pyg_and_sends_the_same(workspace, trained):
    """Without overlap GAT's owner sums in one pass after synchronous exchanges (with it, the
    local state is computed while the rows travel, then merged): PyG's numbers and the same
    bytes either way."""
    header, epochs = assert_matches_pyg(workspace, trained(OPTIONS_AT), "gat-hybrid-sync")
    (_, overlapped, _), _ = run_of(workspace, trained(OPTIONS_AT), "gat-hybrid")
    assert not header["config"]["overlap"]
    assert [e["bytes"] for e in epochs] == [e["bytes"] for e in overlapped]


@pytest.mark.parametrize("model", AGGREGATING_FIRST)
def test_aggregating_first_matches_pyg_and_exchanges_input_width_rows(workspace, trained, model):
    """Upstream's order: the last layer aggregates its HIDDEN inputs, not its outputs (the
    first layer's input, which needs no gradient, travels forward only)."""
    header, epochs = assert_matches_pyg(workspace, trained(OPTIONS_AT), f"{model}-hybrid-aggregate-first")
    rows = json.loads((workspace[0] / f"p{OPTIONS_AT}hybrid" / "plan.json").read_text())["total_rows_sent"]
    width = workspace[1].features.shape[1]
    assert header["config"]["aggregate_first"]
    assert all(e["bytes"]["sent_total"] == rows * 4 * ((width + HIDDEN + HIDDEN) + (HIDDEN + HIDDEN)) for e in epochs)


@pytest.mark.parametrize("parts", PARTS)
@pytest.mark.parametrize("model", AGGREGATING_FIRST)
def test_mixture_of_parallelism_matches_pyg_and_moves_the_volume_of_its_algorithm(workspace, trained, parts, model):
    """MixGCN's MoP is exact, and each epoch's transposes move exactly what its Alg. 2 says
    (supergcn.methods.mixgcn): every layer's column -> row transpose forward, both ways at
    layers 1 and 2 forward and backward; the first epoch also transposes the input once."""
    header, epochs = assert_matches_pyg(workspace, trained(parts), f"{model}-mop")
    rows = header["mixture_of_parallelism"]["rows"]
    assert len(rows) == parts and sum(rows) == workspace[1].num_nodes

    def transposed(width):  # rank i sends its rows' columns floor(width j/P).. to every other rank j
        columns = [width * (j + 1) // parts - width * j // parts for j in range(parts)]
        return sum(rows[i] * columns[j] for i in range(parts) for j in range(parts) if j != i)
    width = workspace[1].features.shape[1]
    forward = transposed(width) + 2 * transposed(HIDDEN) + 2 * transposed(HIDDEN)  # column -> row, row -> column
    per_epoch = 4 * (forward + 2 * 2 * transposed(HIDDEN))  # backward: both, at layers 2 and 1
    assert per_epoch == 4 * epoch_transpose_values(rows, [width, HIDDEN, HIDDEN])
    assert [e["bytes"]["sent_total"] for e in epochs] == \
        [per_epoch + 4 * transposed(width)] + [per_epoch] * (len(epochs) - 1)
    # The tables name the run for its parallelism: hybrid's plan, but MixGCN's variant.
    assert run_record(workspace[0] / f"P{parts}-{model}-mop.jsonl")["variant"] == "hybrid-fp32-nolp" + (
        "" if model == "sage" else f"-{model}") + "-mop"
    assert header["mixture_of_parallelism"]["replicated_adjacency_bytes"] == [
        8 * (workspace[1].num_nodes + 1 + len(workspace[1].indices))] * parts


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_clipped_gradients_match_pyg_clipping_its_own(workspace, trained, strategy):
    """--grad-clip clips the summed gradients, as single-process training clips its own."""
    baselines = workspace[2]
    assert not np.allclose(baselines["sage", CLIP]["losses"], baselines["sage", 0.0]["losses"], rtol=1e-3), \
        "the clip must change training"
    assert_matches_pyg(workspace, trained(OPTIONS_AT), f"sage-{strategy}-clipped")
