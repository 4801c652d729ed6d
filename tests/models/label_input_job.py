"""Run by tests/models/test_inputs.py under ``mpiexec -n P``: the factored first-layer input
of masked label propagation (:class:`supergcn.models.inputs.LabelledInput`) against the
written-out formulation ``X' = N(X + S E[y])`` differentiated by autograd, on the same
rank's operators: the same loss, logits and summed gradients within 1e-5 (Int2: see
:func:`agree`), and the same
bytes sent (fewer for an exact exchange that aggregates first), for SAGE and GCN, with
and without input_norm, FP32 and Int2, and a first layer that transforms first
(hidden < F) and one that aggregates first (hidden > F)."""

import itertools

import numpy as np
import torch
import torch.nn.functional as F
from mpi4py import MPI

from supergcn.data.datasets import prepare_dataset
from supergcn.distributed.comm import Communicator
from supergcn.distributed.graph_ops import GraphOps
from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
from supergcn.distributed.timing import PhaseTimer
from supergcn.partition.metis import partition_graph
from supergcn.testing.plans import build_plans
from supergcn.train.gnn import GNN, activate

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
graph = prepare_dataset("synthetic-tiny")
partition = partition_graph(graph, size)
plans, _ = build_plans(graph, partition, "hybrid")
plan = plans[rank]
owned = partition.new_to_old[partition.offsets[rank]:partition.offsets[rank + 1]]
x = torch.from_numpy(np.asarray(graph.features)[owned]).float()
y = torch.from_numpy(np.asarray(graph.labels)[owned]).long()
train_nodes = torch.from_numpy(np.flatnonzero(np.asarray(graph.train_mask)[owned]))
order = train_nodes[torch.randperm(len(train_nodes), generator=torch.Generator().manual_seed(rank))]
# The last rank feeds no label (a rank of few training nodes can draw none): it must still
# run the exchanges the others run.
inputs = 0 if rank == size - 1 and size > 1 else len(order) * 6 // 10
label_nodes, loss_nodes = order[:inputs], order[inputs:]
global_loss_nodes = comm.allreduce(len(loss_nodes))


def bytes_sent(operators):
    return sum(int(sent.sum()) for sent in operators.communicator.bytes_sent.values())


def written_out_forward(model, ops):
    """The naive formulation: X' written out, requiring a gradient, fed to the layers."""
    h = x.index_add(0, label_nodes, model.label_embedding(y[label_nodes]))
    if model.input_norm is not None:
        h = model.input_norm(h)
    for conv, norm in zip(model.convs[:-1], model.norms):
        h = activate(conv(h, ops), norm, model.dropout, model.training)
    return F.log_softmax(model.convs[-1](h, ops), -1)


def agree(mine, theirs, bits, what):
    """Within 1e-5 of each other; for Int2, a difference within 1e-3 of the tensor's norm:
    the two formulations round differently in the last float bit, and a value that lands
    on the edge between two of Int2's four levels is sent as either (a level is a third of
    its row's range), moving every entry it reaches downstream a little."""
    if bits == 32:
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5, err_msg=what)
    else:
        assert np.linalg.norm(mine - theirs) <= 1e-3 * np.linalg.norm(theirs), (what, mine, theirs)


def step(model, ops, forward):
    """(loss, logits, summed gradients, bytes sent) of one training pass."""
    model.zero_grad()
    before = bytes_sent(ops.operators)
    ops.begin_pass(training=True)
    logits = forward()
    loss = F.nll_loss(logits[loss_nodes], y[loss_nodes], reduction="sum") / global_loss_nodes
    loss.backward()
    grads = [comm.allreduce(p.grad.numpy()) for p in model.parameters()]
    return comm.allreduce(loss.item()), logits.detach(), grads, bytes_sent(ops.operators) - before


for model_name, input_norm, bits, hidden in itertools.product(("sage", "gcn"), (False, True), (32, 2), (16, 48)):
    case = f"{model_name} input_norm={input_norm} bits={bits} hidden={hidden} (F=32)"
    torch.manual_seed(0)
    model = GNN(model_name, x.shape[1], hidden, graph.num_classes, num_layers=3, dropout=0.0,
                label_propagation=True, input_norm=input_norm)
    with torch.no_grad():  # LayerNorm starts as the identity map: give it something to get wrong
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    ops = GraphOps(RankOperators(plan, Communicator(comm), PhaseTimer(), settings=ExchangeSettings(bits=bits)))
    factored = step(model, ops, lambda: model(x, ops, label_nodes, y[label_nodes]))
    naive = step(model, ops, lambda: written_out_forward(model, ops))
    assert abs(factored[0] - naive[0]) <= 1e-5, (case, factored[0], naive[0])
    agree(factored[1].numpy(), naive[1].numpy(), bits, f"{case}: logits")
    for (name, _), mine, theirs in zip(model.named_parameters(), factored[2], naive[2]):
        agree(mine, theirs, bits, f"{case}: gradient of {name}")
    if bits == 32 and hidden > x.shape[1] and not input_norm:
        # FP32, aggregating first: the label part travels as one-hot rows of width C forward
        # instead of the F-wide gradient of X' backward.
        assert factored[3] < naive[3] or size == 1, (case, factored[3], naive[3])
    else:  # the exchanged rows are those of the written-out X' (Int2: the same quantized bytes)
        assert factored[3] == naive[3], (case, factored[3], naive[3])
    assert size == 1 or factored[3] > 0, case

print(f"rank {rank} ok", flush=True)
