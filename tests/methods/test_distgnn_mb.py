"""DistGNN-MB's mini-batch training (supergcn.methods.distgnn_mb) held to independent
references: at one rank, PyG's ``SAGEConv`` and ``GATConv`` trained on the same sampled
blocks from the same weights, step by step, and GAT's attention dropout on a block against
``GATConv``'s under the same torch stream; at three ranks, the bytes of every push of either
model against the candidates counted from the blocks each rank samples
(Σ_peers min(nc, candidates) · (8 + 4 d)), and training without a push sending nothing and
hitting no cache line."""

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from supergcn.data.graph import load_graph, read_graph_meta, save_graph
from supergcn.kernels.sampling import sample_blocks
from supergcn.methods.distgnn_mb.blocks import BlockOps
from supergcn.methods.distgnn_mb.graph import PartitionGraph
from supergcn.methods.distgnn_mb.training import batch_seeds, epoch_order
from supergcn.models.gat.layer import Layer, copy_to_pyg, pyg_conv
from supergcn.partition.metis import partition_graph
from supergcn.partition.store import run_partition
from supergcn.plan.store import load_rank_plan, run_plan
from supergcn.testing.pyg import PyGModel, copy_weights
from supergcn.train.config import TrainConfig
from supergcn.train.gnn import GNN
from supergcn.train.metrics import read_metrics

from conftest import run_rank_job
from distgnn_mb_common import BATCH, EPOCHS, FANOUTS, HIDDEN, LAYERS, LR, PUSH, RUNS, SEED

FANOUT_COUNTS = [int(f) for f in FANOUTS.split(",")]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """synthetic-tiny in one part and in three, their hybrid plans, each model's initial
    weights, and the MPI job's runs at P = 1 and 3."""
    from supergcn.data.datasets import prepare_dataset

    root = tmp_path_factory.mktemp("distgnn_mb")
    meta = save_graph(prepare_dataset("synthetic-tiny"), root / "g")
    graph = load_graph(root / "g")
    for parts in RUNS:
        manifest = run_partition(graph, meta["hash"], parts, root / f"p{parts}")
        run_plan(graph, meta["hash"], partition_graph(graph, parts), manifest["partition_hash"], "hybrid",
                 root / f"p{parts}hybrid")
    torch.manual_seed(3)
    for model in ("sage", "gat"):
        torch.save(GNN(model, graph.features.shape[1], HIDDEN, graph.num_classes, LAYERS, dropout=0.0).state_dict(),
                   root / f"init-{model}.pt")
    for parts in RUNS:
        run_rank_job(Path(__file__).with_name("distgnn_mb_job.py"), parts, timeout=300,
                     args=[root])
    return root, graph


def rank_sampling(root, graph, parts, rank):
    """Rank ``rank``'s sampling graph and training nodes, as the trainer builds them."""
    plan = load_rank_plan(root / f"p{parts}hybrid", rank)
    parts_of = np.load(root / f"p{parts}" / "parts.npy")
    sampling = PartitionGraph.from_graph(graph, parts_of, parts, rank, plan.owned_old_ids)
    return plan, sampling, np.flatnonzero(np.asarray(graph.train_mask)[plan.owned_old_ids])


@pytest.mark.parametrize("run", ["mb", "mb-gat"])
def test_one_rank_trains_what_pyg_trains_on_the_same_blocks(workspace, run):
    """Every step's loss equals PyG's (SAGEConv or GATConv on the bipartite blocks, Adam),
    within 1e-5. GATConv on (x_src, x_src[:num_dst]) adds a self loop to each destination,
    the first num_dst sources, as ours attends over its own row."""
    root, graph = workspace
    model_name = RUNS[1][run]["model"]
    _, epochs, _ = read_metrics(root / f"P1-{run}.jsonl")
    ours = [loss for epoch in epochs for loss in epoch["minibatch"]["step_losses"]]
    plan, sampling, train_nodes = rank_sampling(root, graph, 1, 0)
    x = torch.from_numpy(np.asarray(graph.features)[plan.owned_old_ids])
    y = torch.from_numpy(np.asarray(graph.labels)[plan.owned_old_ids])
    model = GNN(model_name, x.shape[1], HIDDEN, graph.num_classes, LAYERS, dropout=0.0)
    model.load_state_dict(torch.load(root / f"init-{model_name}.pt"))
    pyg = PyGModel(model_name, x.shape[1], HIDDEN, graph.num_classes, LAYERS, dropout=0.0)
    copy_weights(model, pyg)
    optimizer = torch.optim.Adam(pyg.parameters(), lr=LR)
    expected = []
    for epoch in range(1, EPOCHS + 1):
        order = epoch_order(train_nodes, SEED, 0, epoch)
        for step in range(-(-len(train_nodes) // BATCH)):
            seeds = batch_seeds(order, step, BATCH)
            blocks = sample_blocks(sampling, seeds, FANOUT_COUNTS, (SEED, 0, epoch, step))
            h = x[torch.from_numpy(blocks[0].src)]
            for layer, (conv, block) in enumerate(zip(pyg.convs, blocks)):
                destinations = np.repeat(np.arange(block.num_dst), np.diff(block.indptr))
                edges = torch.from_numpy(np.stack([block.indices, destinations]))
                h = conv((h, h[:block.num_dst]), edges, size=(len(block.src), block.num_dst))
                if layer < LAYERS - 1:
                    h = F.relu(pyg.norms[layer](h))
            loss = F.nll_loss(F.log_softmax(h, -1), y[torch.from_numpy(seeds)])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            expected.append(loss.item())
    assert len(ours) == len(expected) > EPOCHS
    np.testing.assert_allclose(ours, expected, rtol=1e-5)
    assert all(epoch["bytes"]["sent_total"] == 0 and epoch["minibatch"]["lookups"] == [0] * LAYERS
               for epoch in epochs)


def test_gat_attention_dropout_on_a_block_drops_what_pyg_drops():
    """A GAT layer training with attention dropout on a block whose edges include a self
    loop (dropped and added back once, as PyG does) and a destination without a kept edge:
    output and gradients equal GATConv's under the same torch stream (both draw the mask
    over the edges in PyG's order, the self loops last)."""
    rng = np.random.default_rng(7)
    num_dst, num_src = 6, 13
    rows = [np.sort(rng.choice(num_src, 3, replace=False)) for _ in range(num_dst - 1)] + [np.empty(0, np.int64)]
    rows[1] = np.union1d(rows[1], [1])  # destination 1's own source: a self loop
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.concatenate(rows).astype(np.int64)
    torch.manual_seed(11)
    ours = Layer(5, 8, heads=4, attention_dropout=0.4).train()
    theirs = pyg_conv(5, 8, False, 4)
    copy_to_pyg(ours, theirs)
    theirs.dropout = 0.4
    x = torch.randn(num_src, 5, requires_grad=True)
    x_pyg = x.detach().clone().requires_grad_()
    torch.manual_seed(12)
    out = ours(x, BlockOps(indptr, indices, num_src, 0))
    torch.manual_seed(12)
    edges = torch.from_numpy(np.stack([indices, np.repeat(np.arange(num_dst), np.diff(indptr))]))
    expected = theirs((x_pyg, x_pyg[:num_dst]), edges, size=(num_src, num_dst))
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    weights = torch.randn_like(out)
    (out * weights).sum().backward()
    (expected * weights).sum().backward()
    torch.testing.assert_close(x.grad, x_pyg.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.att_dst.grad, theirs.att_dst.grad, rtol=1e-5, atol=1e-6)


def expected_push_bytes(root, graph, epoch):
    """Bytes the three ranks push in ``epoch``, counted from the blocks each samples: at
    every step but the last (the delay is 1), layer and peer, min(nc, the layer's solid
    sources that are halos on the peer) vertices of an int64 id and a float32 row of the
    layer's input width (the features, then the hidden width: SAGE's, and GAT's H heads of
    hidden / H concatenated)."""
    ranks = [rank_sampling(root, graph, 3, rank) for rank in range(3)]
    steps = max(-(-len(train) // BATCH) for _, _, train in ranks)
    widths = [graph.features.shape[1], HIDDEN, HIDDEN]
    total = 0
    for rank, (_, sampling, train) in enumerate(ranks):
        order = epoch_order(train, SEED, rank, epoch)
        for step in range(steps - 1):
            blocks = sample_blocks(sampling, batch_seeds(order, step, BATCH), FANOUT_COUNTS, (SEED, rank, epoch, step))
            for block, width in zip(blocks, widths):
                solid = block.src[:block.num_solid]
                for peer in (p for p in range(3) if p != rank):
                    candidates = int(np.isin(solid, sampling.boundary[peer]).sum())
                    total += min(PUSH, candidates) * (8 + 4 * width)
    return total


@pytest.mark.parametrize("run", ["mb-push", "mb-gat-push"])
def test_each_push_sends_the_candidates_capped_at_nc(workspace, run):
    root, graph = workspace
    _, epochs, _ = read_metrics(root / f"P3-{run}.jsonl")
    for number, epoch in enumerate(epochs, 1):
        expected = expected_push_bytes(root, graph, number)
        assert epoch["bytes"]["sent_total"] == expected > 0
        pushed = epoch["minibatch"]["pushed"]
        widths = [graph.features.shape[1], HIDDEN, HIDDEN]
        assert sum(count * (8 + 4 * width) for count, width in zip(pushed, widths)) == expected
        # The pushed rows fill the caches: halos hit at every layer.
        assert all(0 < rate <= 1 for rate in epoch["minibatch"]["hit_rate"])


def test_without_a_push_nothing_crosses_and_every_halo_misses(workspace):
    """--hec-push 0 is local-only training: no byte sent, every halo looked up and dropped."""
    root, _ = workspace
    _, epochs, summary = read_metrics(root / "P3-mb-local.jsonl")
    for epoch in epochs:
        assert epoch["bytes"]["sent_total"] == 0
        assert epoch["minibatch"]["hit_rate"] == [0.0] * LAYERS
        assert all(lookups > 0 for lookups in epoch["minibatch"]["lookups"])
    assert summary["identical_parameters"]


def test_a_minibatch_step_clips_books_each_instant_once_and_takes_the_torch_kernels(workspace):
    """distgnn_mb_step_job.py: the clip every step, the stages within the epoch's wall time on
    every rank, the torch kernels where asked (the numba ones made to fail)."""
    root, graph = workspace
    graph_hash = read_graph_meta(root / "g")["hash"]
    manifest = run_partition(graph, graph_hash, 2, root / "p2")
    run_plan(graph, graph_hash, partition_graph(graph, 2), manifest["partition_hash"], "hybrid", root / "p2hybrid")
    run_rank_job(Path(__file__).with_name("distgnn_mb_step_job.py"), 2, timeout=300, args=[root])


def test_minibatch_training_runs_gat():
    paths = {name: "x" for name in ("graph", "partition", "plan", "out")}
    assert TrainConfig(**paths, batch_size=100, model="gat").conflicts() == []
