"""What the rest of the package asks of a GNN model: its :class:`ModelCard`.

Standard library only: the workflow reads the cards while it parses (which hybrid plans a
model needs), and the plan builder prices its cover with them without loading torch.

A layer from ``a`` to ``b`` features exchanges rows of one width: its input width where it
aggregates first, its output width where it transforms first (aggregation is linear, so
both orders give the same result up to float rounding, and the narrower rows cost fewer
bytes). Per layer and direction it makes the exchanges its card lists
(:class:`Message`): rows of the layer's width at the exchange's bits, and for some
models float32 scalars besides. Backward makes the same exchanges transposed, in reverse
order, for every layer whose aggregated input needs a gradient: all but the first, and
the first too where it transforms first (its weight needs the gradient) or where its
input does (masked label propagation, input LayerNorm).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Message:
    """One exchange of a layer's forward pass. Rank i sends rank j ``pre`` · PRE[i][j] +
    ``post`` · POST[i][j] rows (the plan's rows of each kind), or, ``transposed``, rank j
    sends rank i as many (owner to sender).

    Args:
        kind: ``data``, rows of the layer's exchanged width; ``attention``, rows of
            ``heads`` float32 scalars.
        pre: rows per PRE row of the plan.
        post: rows per POST row of the plan.
        transposed: sent against the plan's direction.
    """

    kind: str
    pre: int = 1
    post: int = 1
    transposed: bool = False


@dataclass(frozen=True)
class LayerExchange:
    """What one layer exchanges.

    Args:
        width: values per exchanged row.
        backward: whether the layer's backward exchanges too.
    """

    width: int
    backward: bool


def narrower_output(in_dim: int, out_dim: int) -> bool:
    """SAGE's and GIN's rule: transform first where the output is narrower than the input.

    Args:
        in_dim: the layer's input width.
        out_dim: its output width.

    Returns:
        Whether the layer transforms first.
    """
    return out_dim < in_dim


def no_conflicts(settings) -> list[str]:
    """The conflicts of a model (or a compared method) that trains with any options: none.

    Args:
        settings: the run's training options.

    Returns:
        An empty list.
    """
    return []


@dataclass(frozen=True)
class ModelCard:
    """A GNN model as the rest of the package sees it; its layer lives beside it
    (``supergcn.models.<name>.layer``).

    Args:
        name: the model's name in options, paths and tables.
        title: its name in prose (``GraphSAGE``).
        transforms_first: ``(in_dim, out_dim) -> bool``: whether a layer projects before it
            aggregates (unless ``aggregate_first`` is set, where that applies).
        messages: the exchanges of one layer's forward pass, in order.
        always_projects_first: ``aggregate_first`` does not apply (GAT scores projected rows).
        projected_width: ``(out_dim, last, heads) -> width`` of the rows a layer that projects
            first exchanges; None for its output width.
        backward_gathers: passes over the in-edges a layer's backward makes.
        gathers_self_loops: whether each pass also reads a row per owned node.
        training_options: the training options only this model reads.
        training_defaults: training options whose default differs for this model, and the
            value it trains with unless the user sets one.
        delayable: whether DistGNN's delayed aggregates are defined for its aggregation
            (a mean).
        trains_on_blocks: whether its layer runs on a mini-batch's sampled blocks
            (DistGNN-MB, :mod:`supergcn.methods.distgnn_mb`: its paper's GraphSAGE and GAT).
        conflicts: ``(settings) -> list[str]``: what it cannot train with, one message and
            fix each.
        bfloat16_auto: ``--precision auto`` picks bf16 for it (where the CPU has AMX-BF16,
            :data:`supergcn.train.precision.BFLOAT16_FASTER`): its test accuracy in bf16
            stayed within :data:`supergcn.train.precision.ACCURACY_HELD` points of float32's
            on every graph measured (docs/results.md, "bfloat16 against float32: accuracy").
    """

    name: str
    title: str
    transforms_first: Callable[[int, int], bool]
    messages: tuple[Message, ...] = (Message("data"),)
    always_projects_first: bool = False
    projected_width: Callable[[int, bool, int], int] | None = None
    backward_gathers: int = 1
    gathers_self_loops: bool = False
    training_options: tuple[str, ...] = ()
    training_defaults: dict = field(default_factory=dict)
    delayable: bool = False
    trains_on_blocks: bool = False
    conflicts: Callable[[object], list[str]] = no_conflicts
    bfloat16_auto: bool = False

    @property
    def weighted_cover(self) -> bool:
        """Whether a PRE and a POST row cost differently, so that the model's hybrid plan
        holds a cover of its own (:func:`supergcn.plan.costs.row_costs`)."""
        return any(message.pre != message.post for message in self.messages)

    @property
    def linear_aggregation(self) -> bool:
        """Whether a layer's aggregation is a (row-scaled) sum of neighbour rows and nothing
        else crosses ranks: what sampling rows (BNS-GCN) or using stale ones (PipeGCN) is
        defined on. GAT's softmax needs its scores and maxima exchanged with the rows."""
        return self.messages == (Message("data"),) and not self.always_projects_first

    def layer_transforms_first(self, in_dim: int, out_dim: int, aggregate_first: bool = False) -> bool:
        """Whether a layer from ``in_dim`` to ``out_dim`` projects before it aggregates.

        Args:
            in_dim: the layer's input width.
            out_dim: its output width.
            aggregate_first: aggregate first wherever that applies (upstream SuperGCN).

        Returns:
            The order the layer runs in.
        """
        if self.always_projects_first:
            return True
        return self.transforms_first(in_dim, out_dim) and not aggregate_first

    def exchanges(self, in_features: int, hidden: int, out_features: int, num_layers: int, heads: int = 1,
                  aggregate_first: bool = False, input_requires_grad: bool = False) -> list[LayerExchange]:
        """What each layer exchanges (module docstring).

        Args:
            in_features: input features.
            hidden: hidden width (all heads together).
            out_features: classes.
            num_layers: graph convolutions.
            heads: attention heads, where the model has them.
            aggregate_first: aggregate first wherever that applies.
            input_requires_grad: whether the first layer's input needs a gradient.

        Returns:
            One entry per layer.
        """
        dims = [in_features] + [hidden] * (num_layers - 1) + [out_features]
        layers = []
        for layer, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            first = self.layer_transforms_first(a, b, aggregate_first)
            last = layer == num_layers - 1
            width = (self.projected_width or (lambda out, _last, _heads: out))(b, last, heads) if first else a
            layers.append(LayerExchange(width, layer > 0 or first or input_requires_grad))
        return layers

