"""SAR's sequential aggregation (:mod:`supergcn.methods.sar`): ``sa`` and ``sar`` train the
model the one-shot exchange trains, to rounding, and PyG's to every exact path's tolerance
(SAGE, GCN, GIN on a post and a hybrid plan at P = 3, 5, 7, one MPI job per P); they move the
one-shot exchange's bytes every epoch, and a rank holds one peer's rows at a time."""

import numpy as np
import pytest
import torch

from supergcn.data.graph import load_graph, save_graph
from supergcn.partition.metis import partition_graph
from supergcn.partition.store import run_partition
from supergcn.plan.store import load_rank_plan, run_plan
from supergcn.report.tables import run_record
from supergcn.testing.pyg import PyGModel, copy_weights, train_baseline
from supergcn.train.gnn import GNN
from supergcn.train.metrics import read_metrics
from supergcn.variants import display_name

from conftest import run_rank_job
from sar_common import EPOCHS, HIDDEN, LR, MODELS, PARTS, STRATEGIES

WIDEST = HIDDEN  # synthetic-tiny's 32 features and the hidden width: the widest rows any layer exchanges


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The graph, its partitions and post and hybrid plans at each P, each model's initial
    weights and PyG's training from them."""
    from supergcn.data.datasets import prepare_dataset

    root = tmp_path_factory.mktemp("sar")
    meta = save_graph(prepare_dataset("synthetic-tiny"), root / "g")
    graph = load_graph(root / "g")
    assert graph.features.shape[1] == WIDEST
    for parts in PARTS:
        manifest = run_partition(graph, meta["hash"], parts, root / f"p{parts}")
        partition = partition_graph(graph, parts)
        for strategy in STRATEGIES:
            run_plan(graph, meta["hash"], partition, manifest["partition_hash"], strategy,
                     root / f"p{parts}-{strategy}")
    baselines = {}
    for model in MODELS:
        torch.manual_seed(5)
        ours = GNN(model, graph.features.shape[1], HIDDEN, graph.num_classes, dropout=0.0)
        torch.save(ours.state_dict(), root / f"init_{model}.pt")
        pyg = PyGModel(model, graph.features.shape[1], HIDDEN, graph.num_classes, dropout=0.0)
        copy_weights(ours, pyg)
        baselines[model] = train_baseline(graph, pyg, EPOCHS, LR)
    return root, baselines


@pytest.fixture(scope="module")
def trained(request, workspace):
    """``trained(P)`` runs the MPI job of P ranks once and returns P."""
    done = set()

    def run(parts: int) -> int:
        if parts not in done:
            run_rank_job(request.path.with_name("sar_job.py"), parts, timeout=400, args=[workspace[0]])
            done.add(parts)
        return parts
    return run


def run_of(root, parts, name):
    return read_metrics(root / f"P{parts}-{name}.jsonl"), np.load(root / f"P{parts}-{name}.npy")


@pytest.mark.parametrize("mode", ["sa", "sar"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("parts", PARTS)
def test_sar_trains_the_one_shot_model_and_pyg_s(workspace, trained, parts, model, strategy, mode):
    """Losses and final log-probabilities equal the one-shot run's to rounding (the sums are
    taken peer by peer) and PyG's to 1e-5 / 1e-4 as every exact path's; every rank ends with
    the same parameters; each epoch sends exactly the one-shot exchange's bytes; the run is
    named SAR's way."""
    root, baselines = workspace
    name = f"{model}-{strategy}-{mode}"
    (header, epochs, summary), logits = run_of(root, trained(parts), name)
    (_, one_shot, _), one_shot_logits = run_of(root, parts, f"{model}-{strategy}-off")
    assert header["config"]["sar"] == mode and header["num_ranks"] == parts
    np.testing.assert_allclose([e["loss"] for e in epochs], [e["loss"] for e in one_shot], rtol=1e-6)
    np.testing.assert_allclose(logits, one_shot_logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose([e["loss"] for e in epochs], baselines[model]["losses"], rtol=1e-5)
    np.testing.assert_allclose(logits, baselines[model]["logits"], rtol=1e-4, atol=1e-4)
    assert summary["identical_parameters"]
    assert [e["bytes"] for e in epochs] == [e["bytes"] for e in one_shot]
    assert all(e["bytes"]["data_sent_total"] > 0 for e in epochs)
    variant = run_record(root / f"P{parts}-{name}.jsonl")["variant"]
    expected = {"sa": "SAR (SA)", "sar": "SAR"}[mode]
    assert display_name(variant) == (expected if model == "sage" and strategy == "post" else variant)


@pytest.mark.parametrize("parts", PARTS)
def test_a_rank_holds_one_peers_rows_at_a_time(workspace, trained, parts):
    """The header's rows per rank are its plan's: its largest peer's and all peers'; each
    epoch the most bytes of received rows alive at once are the largest peer's at the widest
    layer, below what the one-shot exchange holds (every peer's)."""
    root, _ = workspace
    (header, epochs, _), _ = run_of(root, trained(parts), "sage-post-sar")
    entry = header["sequential_aggregation"]
    counts = [load_rank_plan(root / f"p{parts}-post", rank).recv_counts for rank in range(parts)]
    assert entry["mode"] == "sar" and entry["refetches"] is False
    assert entry["largest_peer_rows"] == [int(c.max()) for c in counts]
    assert entry["rows_at_once"] == [int(c.sum()) for c in counts]
    for epoch in epochs:
        held = epoch["sequential_aggregation"]
        assert held["largest_peer_bytes"] == max(entry["largest_peer_rows"]) * WIDEST * 4
        assert held["at_once_bytes"] == max(entry["rows_at_once"]) * WIDEST * 4
        assert held["largest_peer_bytes"] < held["at_once_bytes"]
