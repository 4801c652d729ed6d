"""What a PRE and a POST row cost per training epoch: the weights of the plan's cover.

Standard library only: the workflow reads :data:`SHAPE_OPTIONS` while it parses.

A model's card (:mod:`supergcn.models`) lists the exchanges of each layer: per PRE row and
per POST row, how many rows of the layer's width and how many float32 scalars. Forward
makes them once per layer, backward once per layer that exchanges a gradient
(:meth:`~supergcn.models.card.ModelCard.exchanges`), so a row costs, per epoch,

    sum over layers and exchanges of (1 or 2 directions) · (rows per row) · (bits of one such row).

Where a PRE and a POST row cost the same (one row of the layer's width either way: SAGE,
GCN, GIN) the fewest rows (König's cover) are the cheapest and :func:`row_costs` is None;
GAT's PRE row carries 3H scalars to a POST row's H (:mod:`supergcn.models.gat`).
"""

from __future__ import annotations

from supergcn.naming import PARAMETER_DTYPES

#: The training options that shape the model's rows, and those that set their wire format:
#: together, what :func:`row_costs` reads (``supergcn plan`` takes them as its own options).
SHAPE_OPTIONS = ("model", "num_layers", "hidden", "heads")
WIRE_OPTIONS = ("bits", "parameter_dtype")
#: Bits of a float32 value.
FLOAT32_BITS = 32


def row_costs(model_card, num_layers: int, hidden: int, heads: int, num_classes: int, bits: int = 32,
              parameter_dtype: str = "bfloat16", in_features: int | None = None) -> tuple[int, int] | None:
    """The bits a PRE and a POST row cost in one training epoch of the model (module
    docstring), or None where they cost the same.

    Args:
        model_card: the model's :class:`~supergcn.models.card.ModelCard` (the caller looks it up:
            the plan sits below the models, whose layers run on its plans).
        num_layers: graph convolutions.
        hidden: hidden width.
        heads: attention heads, where the model has them.
        num_classes: the classes.
        bits: 32, or the quantized width of the exchanged rows (8, 4, 2).
        parameter_dtype: the wire type of the quantization parameters.
        in_features: the input features; only a model whose first layer may aggregate its
            input before projecting it reads them.

    Returns:
        ``(pre, post)`` bits, or None for the models whose rows cost the same.

    Raises:
        ValueError: ``in_features`` missing where the model reads it.
    """
    if not model_card.weighted_cover:
        return None
    if in_features is None and not model_card.always_projects_first:
        raise ValueError(f"the row costs of {model_card.name} depend on the input features: pass in_features")
    layers = model_card.exchanges(in_features or hidden, hidden, num_classes, num_layers, heads)
    pre = post = 0
    for layer in layers:
        for message in model_card.messages:
            value_bits = (row_bits(layer.width, bits, parameter_dtype) if message.kind == "data"
                          else heads * FLOAT32_BITS)
            directions = 1 + layer.backward
            pre += directions * message.pre * value_bits
            post += directions * message.post * value_bits
    return pre, post


def row_bits(width: int, bits: int, parameter_dtype: str) -> int:
    """Bits of one exchanged row of ``width`` values (a quantized row's packing into bytes
    shared across its peer's rows is left out).

    Args:
        width: values per row.
        bits: 32, or the quantized width.
        parameter_dtype: the wire type of a quantized row's zero point and scale.

    Returns:
        The bits on the wire.
    """
    if bits == FLOAT32_BITS:
        return width * FLOAT32_BITS
    return width * bits + 2 * 8 * PARAMETER_DTYPES[parameter_dtype]
