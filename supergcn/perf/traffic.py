"""What one training epoch exchanges and gathers, per GNN model: the input of the
performance model's epoch time (:func:`supergcn.perf.model.epoch_seconds`).

SAGE, GCN and GIN send one row per PRE or POST row, forward and (transposed) backward,
at the widths :func:`epoch_exchange_widths` gives. GAT (:mod:`supergcn.distributed.attention`)
makes three exchanges per layer and direction, with PRE[i][j] and POST[i][j] the plan's
rows of each kind from i to j and W the layer's exchanged width
(:func:`~supergcn.plan.costs.gat_exchange_widths`)::

    forward:  destination scores PRE^T (H float32 per row, owner to sender),
              rows PRE + POST (W values, at the exchange's bits),
              scalars 2 PRE + POST (H float32 each: a PRE row's sum and maximum, a POST row's score);
    backward: the same three transposed, in reverse order.

Each is an Alltoallv of its own, so each pays the call and per-peer costs, also where it
carries nothing (the scores under ``post``). GAT's aggregation reads every in-edge's
source row (and one self loop per node) once forward and twice backward (by destination for
the scores' gradients, by source for the rows'), at the gather's throughput: a lower bound,
since its kernels run 2.7-3.2x the gather's time per pass (``benchmarks/models.py kernels``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from supergcn.plan.costs import WEIGHTED_COVER_MODELS, gat_exchange_widths


def epoch_exchange_widths(in_features: int, hidden: int, out_features: int, num_layers: int,
                          input_requires_grad: bool = False) -> tuple[list[int], list[int]]:
    """Widths exchanged in one epoch by our GraphSAGE (``supergcn.train.gnn``).

    A layer from a to b features aggregates before transforming unless b < a, when it
    transforms first and exchanges b-wide rows. Gradients come back through every layer
    whose aggregated input needs one: all but the first, and the first too when it
    transforms first (its weight needs the gradient) or when its input does (masked label
    propagation, input LayerNorm).

    Args:
        in_features: input features.
        hidden: hidden width.
        out_features: classes.
        num_layers: graph convolutions.
        input_requires_grad: whether the first layer's input needs a gradient.

    Returns:
        ``(forward, backward)``: the widths of the forward exchanges, layer by layer, and
        of the backward ones.
    """
    dims = [in_features] + [hidden] * (num_layers - 1) + [out_features]
    forward, backward = [], []
    for layer, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        transform_first = b < a
        width = b if transform_first else a
        forward.append(width)
        if layer > 0 or transform_first or input_requires_grad:
            backward.append(width)
    return forward, backward


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
                  out_features: int, num_layers: int, bits: int, heads: int = 1) -> EpochTraffic:
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
        heads: GAT's heads, H.

    Returns:
        The epoch's traffic.
    """
    pre_rows, post_rows = np.asarray(pre_rows, dtype=np.int64), np.asarray(post_rows, dtype=np.int64)
    rows = pre_rows + post_rows
    if model not in WEIGHTED_COVER_MODELS:
        forward, backward = epoch_exchange_widths(in_features, hidden, out_features, num_layers)
        exchanges = ([EpochExchange(rows, width, bits, "data") for width in forward]
                     + [EpochExchange(rows.T, width, bits, "data") for width in reversed(backward)])
        return EpochTraffic(exchanges, forward + backward)
    scalars = 2 * pre_rows + post_rows
    widths = gat_exchange_widths(num_layers, hidden, heads, out_features)
    forward, backward = [], []
    for width in widths:
        forward += [EpochExchange(pre_rows.T, heads, 32, "attention"), EpochExchange(rows, width, bits, "data"),
                    EpochExchange(scalars, heads, 32, "attention")]
        backward = [EpochExchange(scalars.T, heads, 32, "attention"), EpochExchange(rows.T, width, bits, "data"),
                    EpochExchange(pre_rows, heads, 32, "attention")] + backward
    return EpochTraffic(forward + backward, widths * 3, self_loops=True)  # a pass forward, two backward
