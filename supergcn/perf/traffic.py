"""What one training epoch exchanges and gathers, per GNN model: the input of the
performance model's epoch time (:func:`supergcn.perf.prediction.epoch_seconds`).

Each layer makes the exchanges its model's card lists (:mod:`supergcn.models.card`), at
the layer's exchanged width, forward; backward, the same exchanges transposed in reverse
order, for every layer that exchanges a gradient. With PRE[i][j] and POST[i][j] the plan's
rows of each kind from i to j, an exchange of ``pre`` and ``post`` rows per plan row moves
pre · PRE + post · POST rows (transposed: owner to sender). SAGE, GCN and GIN make one,
PRE + POST rows of the layer's width; GAT three (:mod:`supergcn.models.gat`): destination
scores PRE^T (H float32 per row), rows PRE + POST, scalars 2 PRE + POST (H float32 each).

Each is an Alltoallv of its own, so each pays the call and per-peer costs, also where it
carries nothing (GAT's scores under ``post``). The aggregation reads every in-edge's source
row once per pass: one pass forward per layer, and per layer with a backward exchange as
many backward passes as the model's card says (GAT: two, by destination for the scores'
gradients, by source for the rows'; and a self loop per node each pass), at the gather's
throughput: for GAT a lower bound, since its kernels run 2.7-3.2x the gather's time per
pass (``benchmarks/models.py kernels``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from supergcn.models import card

#: What an epoch's exchanges carry: rows of the model (``data``, with their quantization
#: parameters) or attention's float32 scores, maxima and sums (``attention``), as the
#: communicator counts them (:data:`~supergcn.distributed.comm.MESSAGE_KINDS`).
TRAFFIC_KINDS = ("data", "attention")


@dataclass(frozen=True)
class EpochExchange:
    """One exchange of a training epoch.

    Args:
        rows: P x P, [i][j] the rows rank i sends rank j.
        width: the values per row.
        bits: 32, or the quantized width.
        kind: what the rows carry (:data:`TRAFFIC_KINDS`).
    """

    rows: np.ndarray
    width: int
    bits: int
    kind: str


@dataclass(frozen=True)
class EpochTraffic:
    """What one training epoch exchanges (module docstring) and gathers.

    Args:
        exchanges: every exchange of the epoch, forward then backward.
        gather_widths: one entry per pass of the aggregation over a rank's in-edges: the
            width of the rows it reads.
        self_loops: whether each pass also reads one row per owned node (GAT's self loops).
    """

    exchanges: list[EpochExchange]
    gather_widths: list[int]
    self_loops: bool = False


def epoch_traffic(model: str, pre_rows: np.ndarray, post_rows: np.ndarray, in_features: int, hidden: int,
                  out_features: int, num_layers: int, bits: int, heads: int = 1, aggregate_first: bool = False,
                  input_requires_grad: bool = False) -> EpochTraffic:
    """One training epoch's exchanges and aggregation passes of ``model`` (module docstring).

    Args:
        model: one of :data:`supergcn.naming.GNN_MODELS`.
        pre_rows: P x P, [i][j] the PRE rows (partial aggregates) rank i sends rank j per exchange.
        post_rows: P x P, [i][j] the POST rows (raw source rows) rank i sends rank j.
        in_features: input features.
        hidden: hidden width (all heads together).
        out_features: classes.
        num_layers: graph convolutions.
        bits: the rows' bits while training (32, or 8, 4, 2).
        heads: attention heads, where the model has them.
        aggregate_first: aggregate before projecting wherever the model allows it.
        input_requires_grad: whether the first layer's input needs a gradient.

    Returns:
        The epoch's traffic.
    """
    model_card = card(model)
    pre_rows, post_rows = np.asarray(pre_rows, dtype=np.int64), np.asarray(post_rows, dtype=np.int64)
    layers = model_card.exchanges(in_features, hidden, out_features, num_layers, heads, aggregate_first,
                                  input_requires_grad)
    forward, backward = [], []
    for layer in layers:
        exchanges = []
        for message in model_card.messages:
            rows = message.pre * pre_rows + message.post * post_rows
            data = message.kind == "data"
            exchanges.append(EpochExchange(rows.T if message.transposed else rows, layer.width if data else heads,
                                           bits if data else 32, message.kind))
        forward += exchanges
        if layer.backward:
            backward = [EpochExchange(e.rows.T, e.width, e.bits, e.kind) for e in reversed(exchanges)] + backward
    passes = [layer.width for layer in layers]
    passes += [layer.width for layer in layers if layer.backward] * model_card.backward_gathers
    return EpochTraffic(forward + backward, passes, self_loops=model_card.gathers_self_loops)
