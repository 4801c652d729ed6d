"""The single-process PyG model that distributed training is held to.

Built from each layer's PyG counterpart (its model's ``pyg_conv``, :mod:`supergcn.models.layers`)
with the same layer order as :class:`supergcn.train.gnn.GNN`
(conv -> dropout -> LayerNorm -> ReLU, log_softmax at the end), and with
``label_propagation`` PyG's own ``MaskLabel`` on the input (its naive formulation: a copy
of the input with the label embedding added to the masked rows). :func:`copy_weights` maps
our parameters onto it, so the two can start from identical weights.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from supergcn.data.graph import Graph
from supergcn.models.layers import layer_module
from supergcn.train.config import default
from supergcn.train.gnn import GNN


class PyGModel(nn.Module):
    def __init__(self, model: str, in_dim: int, hidden: int, out_dim: int, num_layers: int = 3,
                 dropout: float = 0.5, layer_norm: bool = True, label_propagation: bool = False,
                 heads: int = default("heads")) -> None:
        from torch_geometric.nn import MaskLabel

        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        pyg_conv = layer_module(model).pyg_conv
        self.convs = nn.ModuleList(pyg_conv(a, b, i == num_layers - 1, heads)
                                   for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) if layer_norm else nn.Identity()
                                   for _ in range(num_layers - 1))
        self.dropout = dropout
        self.mask_label = MaskLabel(out_dim, in_dim) if label_propagation else None

    def forward(self, x, edge_index, labels=None, label_mask=None):
        if self.mask_label is not None and label_mask is not None:
            x = self.mask_label(x, labels, label_mask)
        for conv, norm in zip(self.convs[:-1], self.norms):
            x = F.relu(norm(F.dropout(conv(x, edge_index), self.dropout, self.training)))
        return F.log_softmax(self.convs[-1](x, edge_index), dim=-1)


@torch.no_grad()
def copy_weights(ours: GNN, theirs: PyGModel) -> None:
    """Give the PyG model exactly our parameters."""
    for mine, conv in zip(ours.convs, theirs.convs):
        layer_module(ours.model).copy_to_pyg(mine, conv)
    theirs.norms.load_state_dict(ours.norms.state_dict())
    if ours.label_embedding is not None and theirs.mask_label is not None:
        theirs.mask_label.emb.weight.copy_(ours.label_embedding.weight)


def edge_index_of(graph: Graph) -> torch.Tensor:
    """PyG's edge_index (source, target) of the canonical symmetric CSR."""
    targets = np.repeat(np.arange(graph.num_nodes), graph.in_degree)
    return torch.from_numpy(np.stack([np.asarray(graph.indices, dtype=np.int64), targets]))


def train_baseline(graph: Graph, model: PyGModel, epochs: int, lr: float, weight_decay: float = 0.0,
                   label_rate: float = 0.0, grad_clip: float = 0.0) -> dict:
    """Full-batch training; returns per-epoch losses, seconds (the training step alone) and
    validation and test accuracy, best-val test accuracy, and the final log-probabilities.

    With ``label_rate`` > 0 (a model built with ``label_propagation``), each epoch PyG's
    ``MaskLabel.ratio_mask`` feeds every training label as an input with that probability
    and the loss is the mean over the other training nodes (PyG's UniMP example); at
    evaluation every training label is an input.
    """
    from torch_geometric.nn import MaskLabel

    x = torch.from_numpy(np.asarray(graph.features))
    y = torch.from_numpy(np.asarray(graph.labels))
    train, val, test = (torch.from_numpy(np.asarray(m)) for m in (graph.train_mask, graph.val_mask, graph.test_mask))
    edge_index = edge_index_of(graph)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    evaluation_labels = (y, train) if label_rate > 0 else ()
    losses, seconds, val_accs, test_accs, best = [], [], [], [], (-1.0, 0.0)
    for _ in range(epochs):
        started = time.perf_counter()
        model.train()
        optimizer.zero_grad()
        if label_rate > 0:
            label_inputs = MaskLabel.ratio_mask(train, label_rate)
            loss_nodes = train & ~label_inputs
            logits = model(x, edge_index, y, label_inputs)
        else:
            loss_nodes, logits = train, model(x, edge_index)
        loss = F.nll_loss(logits[loss_nodes], y[loss_nodes])
        loss.backward()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        seconds.append(time.perf_counter() - started)
        losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            correct = model(x, edge_index, *evaluation_labels).argmax(-1) == y
        val_acc, test_acc = float(correct[val].float().mean()), float(correct[test].float().mean())
        val_accs.append(val_acc)
        test_accs.append(test_acc)
        if val_acc > best[0]:
            best = (val_acc, test_acc)
    model.eval()
    with torch.no_grad():
        logits = model(x, edge_index, *evaluation_labels).float()  # float32 also under bfloat16 autocast
    return {"losses": losses, "seconds": seconds, "val_acc": val_accs, "test_acc": test_accs,
            "test_acc_at_best_val": best[1],
            "final_test_acc": float((logits.argmax(-1) == y)[test].float().mean()), "logits": logits.numpy()}
