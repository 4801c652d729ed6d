"""GAT (Veličković et al., ICLR '18): PyG's ``GATConv``, H heads of C, LeakyReLU slope 0.2,
self loops, attention dropout. With z = X W^T, per head

    h_v = sum_{u in N(v) ∪ {v}} softmax_u(LeakyReLU(a_dst · z_v + a_src · z_u)) z_u,

the heads concatenated in hidden layers (C = hidden / H) and averaged in the last (C = the
classes), plus a bias. The layer (:mod:`supergcn.models.gat.layer`) always projects first:
the scores are taken of projected rows, so ``aggregate_first`` does not apply.

Its aggregation crosses ranks exactly as an online softmax
(:mod:`supergcn.models.gat.online_softmax`, which states the protocol): per layer and
direction three exchanges — the destination scores of PRE rows (H float32 each, owner to
sender), the rows (H·C values at the exchange's bits) and their scalars (2H float32 for a
PRE row's sum and maximum, H for a POST row's source score). Backward makes the three
transposed, in reverse order. A PRE row thus costs 3H scalars to a POST row's H, so GAT's
hybrid plan holds a cover weighted by those costs
(:func:`supergcn.plan.costs.row_costs`). Its aggregation reads every in-edge's source row
and one self loop per node once forward and twice backward (by destination for the scores'
gradients, by source for the rows').
"""

from supergcn.models.card import Message, ModelCard


def heads_divide_hidden(settings) -> list[str]:
    """GAT's heads are concatenated into the hidden width: they must divide it.

    Args:
        settings: the run's training options (``num_layers``, ``hidden``, ``heads``).

    Returns:
        One message with its fix where they do not.
    """
    if settings.num_layers > 1 and settings.hidden % settings.heads:
        return [f"GAT's {settings.heads} heads are concatenated into the hidden width {settings.hidden}, which "
                "they do not divide — choose --hidden a multiple of --heads"]
    return []


def exchanged_width(out_dim: int, last: bool, heads: int) -> int:
    """The width of a layer's exchanged rows: all heads' C values (heads averaged after the
    exchange in the last layer, so H times the classes there).

    Args:
        out_dim: the layer's output width.
        last: whether it is the last layer.
        heads: H.

    Returns:
        Values per exchanged row.
    """
    return heads * out_dim if last else out_dim


CARD = ModelCard(
    name="gat", title="GAT", transforms_first=lambda in_dim, out_dim: True, always_projects_first=True,
    projected_width=exchanged_width,
    messages=(Message("attention", pre=1, post=0, transposed=True), Message("data"),
              Message("attention", pre=2, post=1)),
    backward_gathers=2, gathers_self_loops=True, training_options=("heads", "attention_dropout"),
    trains_on_blocks=True, conflicts=heads_divide_hidden)
