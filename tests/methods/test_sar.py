"""SAR's sequential aggregation (:mod:`supergcn.methods.sar`): ``sa`` and ``sar`` train the
model the one-shot exchange trains, to rounding, and PyG's to every exact path's tolerance
(SAGE, GCN, GIN on a post and a hybrid plan, GAT on a post plan, at P = 3, 5, 7, one MPI job
per P); they move the one-shot exchange's bytes every epoch (GAT under ``sar``: and its
refetches, one forward's rows and scores again), and a rank holds one peer's rows at a time."""

import numpy as np
import pytest
import torch

from supergcn.data.graph import load_graph, save_graph
from supergcn.partition.metis import partition_graph
from supergcn.partition.store import run_partition
from supergcn.plan.store import load_rank_plan, run_plan
from supergcn.report.tables import run_record
from supergcn.testing.pyg import PyGModel, copy_weights, train_baseline
from supergcn.train.config import TrainConfig
from supergcn.train.gnn import GNN
from supergcn.train.metrics import read_metrics, timed_epochs
from supergcn.variants import display_name

from conftest import run_mpi, run_rank_job
from sar_common import EPOCHS, HIDDEN, LR, MODELS, PARTS, STRATEGIES, cases, plans

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


def forward_bytes(root, parts: int, widths: list[int]) -> int:
    """The bytes of one training forward's rows over all ranks: every row a rank receives
    (its plan's), at each layer's width (values a row, float32)."""
    received = sum(int(load_rank_plan(root / f"p{parts}-post", rank).recv_counts.sum()) for rank in range(parts))
    return received * sum(widths) * 4


def gat_widths(root, header) -> list[int]:
    """Values a GAT row carries per layer: H x C of its rows and H of its scores."""
    heads, classes = header["config"]["heads"], load_graph(root / "g").num_classes
    return [HIDDEN + heads, HIDDEN + heads, heads * classes + heads]


@pytest.mark.parametrize("mode", ["sa", "sar"])
@pytest.mark.parametrize("model, strategy", cases())
@pytest.mark.parametrize("parts", PARTS)
def test_sar_trains_the_one_shot_model_and_pyg_s(workspace, trained, parts, model, strategy, mode):
    """Losses and final log-probabilities equal the one-shot run's to rounding (the sums are
    taken peer by peer) and PyG's to 1e-5 / 1e-4 as every exact path's; every rank ends with
    the same parameters; each epoch sends exactly the one-shot exchange's bytes, and GAT under
    ``sar`` one training forward's more (its refetches); the run is named SAR's way."""
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
    refetched = forward_bytes(root, parts, gat_widths(root, header)) if model == "gat" and mode == "sar" else 0
    assert [e["bytes"]["sent_total"] for e in epochs] == [e["bytes"]["sent_total"] + refetched for e in one_shot]
    if not refetched:
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


@pytest.mark.parametrize("parts", PARTS)
def test_gat_keeps_every_peer_under_sa_and_fetches_again_under_sar(workspace, trained, parts):
    """GAT's backward needs every peer's rows and scores: under ``sa`` the forward keeps them
    all (the one-shot exchange's rows, at the widest layer), under ``sar`` nothing is kept
    and the backward fetches one forward's rows again; either way one peer's rows arrive at
    a time."""
    root, _ = workspace
    counts = [load_rank_plan(root / f"p{parts}-post", rank).recv_counts for rank in range(parts)]
    for mode in ("sa", "sar"):
        (header, epochs, _), _ = run_of(root, trained(parts), f"gat-post-{mode}")
        entry, widths = header["sequential_aggregation"], gat_widths(root, header)
        assert entry["refetches"] is (mode == "sar")
        widest = max(widths) * 4
        for epoch in epochs:
            held = epoch["sequential_aggregation"]
            assert held["largest_peer_bytes"] == max(int(c.max()) for c in counts) * widest
            assert held["at_once_bytes"] == max(int(c.sum()) for c in counts) * widest
            assert held["kept_for_backward_bytes"] == (held["at_once_bytes"] if mode == "sa" else 0)
            most_received = max(int(c.sum()) for c in counts) * sum(widths) * 4
            assert held["refetch_bytes"] == (most_received if mode == "sar" else 0)
            assert (held["refetch_seconds"] > 0) is (mode == "sar")
        # The runs table (and the breakdown, its mean over seeds) names the refetches' time.
        timed = timed_epochs(epochs)
        refetched = run_record(root / f"P{parts}-gat-post-{mode}.jsonl")["refetch_seconds"]
        assert refetched == pytest.approx(np.mean([e["sequential_aggregation"]["refetch_seconds"] for e in timed]))
        assert (refetched > 0) is (mode == "sar")
    assert run_record(root / f"P{parts}-gat-post-off.jsonl")["refetch_seconds"] is None


def test_gat_on_a_plan_with_pre_rows_is_refused_with_the_post_plan(workspace, tmp_path):
    """SAR's softmax takes the post plan's raw rows: a hybrid plan is refused before training."""
    root, _ = workspace
    result = run_mpi(3, "train", "--graph", root / "g", "--partition", root / "p3", "--plan", root / "p3-hybrid",
                     "--out", tmp_path / "m.jsonl", "--model", "gat", "--sar", "sar")
    assert result.returncode == 2 and "SAR runs on a post plan with GAT" in result.stderr, result.stderr
    assert "--strategy post" in result.stderr and not (tmp_path / "m.jsonl").exists()


def sar_conflicts(**options) -> list[str]:
    paths = {name: f"/nonexistent/{name}" for name in ("graph", "partition", "plan", "out")}
    return TrainConfig(**paths, sar="sar", **options).conflicts()


def test_what_sar_takes_and_refuses_with_its_fix():
    """Every model of this package runs under SAR; GAT's softmax draws no attention dropout
    and runs on the numba kernels, and the refusals say so with the fix."""
    from supergcn.methods import card
    from supergcn.models import card as model_card

    for model in MODELS:
        assert sar_conflicts(model=model) == [], model
        assert set(plans(model)) <= set(card("sar").plans_for(model_card(model))), "the runs take the card's plans"
    assert card("sar").plans_for(model_card("gat")) == ("post",)
    (dropout,) = sar_conflicts(model="gat", attention_dropout=0.5)
    assert "--attention-dropout 0" in dropout and "--sar off" in dropout
    (kernel,) = sar_conflicts(model="gat", kernel="torch")
    assert "--kernel numba" in kernel and "--sar off" in kernel
    assert sar_conflicts(model="sage", kernel="torch") == []
