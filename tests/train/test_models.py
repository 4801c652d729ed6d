"""GIN and GAT trained across ranks, held to PyG's single-process ``GINConv`` and
``GATConv``: every strategy, at P = 3, 5 and 7, from the same initial weights."""

import numpy as np
import pytest
import torch

from supergcn.data.graph import load_graph, save_graph
from supergcn.naming import STRATEGIES
from supergcn.partition.metis import partition_graph
from supergcn.partition.store import run_partition
from supergcn.plan.costs import row_costs
from supergcn.plan.store import read_plan_pairs, run_plan
from supergcn.train.gnn import GNN
from supergcn.train.metrics import read_metrics
from supergcn.train.reference import PyGModel, copy_weights, train_baseline

from conftest import run_rank_job
from models_common import EPOCHS, HEADS, HIDDEN, LAYERS, LR, MODELS, run_name

PARTS = (3, 5, 7)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
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
    for model in MODELS:
        torch.manual_seed(3)
        ours = GNN(model, graph.features.shape[1], HIDDEN, graph.num_classes, LAYERS, dropout=0.0, heads=HEADS)
        torch.save(ours.state_dict(), root / f"init_{model}.pt")
        pyg = PyGModel(model, graph.features.shape[1], HIDDEN, graph.num_classes, LAYERS, dropout=0.0, heads=HEADS)
        copy_weights(ours, pyg)
        baselines[model] = train_baseline(graph, pyg, EPOCHS, LR)
    return root, baselines


@pytest.fixture(scope="module", params=PARTS)
def trained(request, workspace):
    root, _ = workspace
    run_rank_job(request.path.with_name("models_job.py"), request.param, timeout=300, args=[root])
    return request.param


@pytest.mark.parametrize("model, strategy, kernel", [*((m, s, "numba") for m in MODELS for s in STRATEGIES),
                                                    ("gat", "hybrid", "torch")])
def test_distributed_model_matches_pyg(workspace, trained, model, strategy, kernel):
    root, baselines = workspace
    expected, name = baselines[model], run_name(model, trained, strategy, 32, kernel)
    header, epochs, summary = read_metrics(root / f"{name}.jsonl")
    assert header["config"]["model"] == model and header["num_ranks"] == trained
    np.testing.assert_allclose([e["loss"] for e in epochs], expected["losses"], rtol=1e-5)
    np.testing.assert_allclose(np.load(root / f"{name}.npy"), expected["logits"], rtol=1e-4, atol=1e-4)
    assert summary["identical_parameters"]
    assert all(e["bytes"]["data_sent_total"] > 0 for e in epochs)
    # GAT's scores, maxima and sums travel beside the rows; GIN's sums need none.
    assert all((e["bytes"]["attention_sent_total"] > 0) == (model == "gat") for e in epochs)


def test_int2_gat_sends_a_sixteenth_of_the_rows_and_the_same_attention_scalars(workspace, trained):
    root, _ = workspace
    _, fp32, _ = read_metrics(root / f"{run_name('gat', trained, 'hybrid', 32)}.jsonl")
    _, int2, _ = read_metrics(root / f"{run_name('gat', trained, 'hybrid', 2)}.jsonl")
    for exact, quantized in zip(fp32, int2):
        # Two bits for 32, each peer's rows packed four to a byte (a partial byte rounds up).
        assert 15 * quantized["bytes"]["data_sent_total"] <= exact["bytes"]["data_sent_total"]
        assert 16 * quantized["bytes"]["data_sent_total"] >= exact["bytes"]["data_sent_total"]
        assert quantized["bytes"]["attention_sent_total"] == exact["bytes"]["attention_sent_total"]
        assert np.isfinite(quantized["loss"]) and quantized["loss"] == pytest.approx(exact["loss"], rel=0.05)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gat_epoch_bytes_are_what_its_row_costs_say(workspace, trained, strategy):
    """A training epoch of GAT sends, in FP32, exactly its PRE rows times a PRE row's cost
    and its POST rows times a POST row's (supergcn.plan.costs): rows, scalars, scores."""
    root, _ = workspace
    pairs = read_plan_pairs(root / f"p{trained}{strategy}")
    graph = load_graph(root / "g")
    pre_cost, post_cost = row_costs("gat", LAYERS, HIDDEN, HEADS, graph.num_classes)
    expected_bits = pre_cost * int(pairs["pre_rows"].sum()) + post_cost * int(pairs["post_rows"].sum())
    _, epochs, _ = read_metrics(root / f"{run_name('gat', trained, strategy, 32)}.jsonl")
    for epoch in epochs:
        assert epoch["bytes"]["sent_total"] * 8 == expected_bits
