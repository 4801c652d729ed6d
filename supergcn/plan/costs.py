"""What a PRE and a POST row cost per training epoch: the weights of the plan's cover.

Standard library only: the workflow reads :data:`SHAPE_OPTIONS` while it parses.

SAGE, GCN and GIN send one row of the layer's width either way, so a PRE and a POST row
cost the same and the fewest rows (König's cover) are the cheapest. GAT's rows
(:mod:`supergcn.distributed.attention`) carry more: per layer and direction, a row of
H·C values (D bits: 32 each, or b each plus the quantization parameters), and float32
scalars — a PRE row its sum and maximum (2H) and the destination score sent the other way
(H), a POST row its source score (H). Forward and backward (the scalars' gradients travel
back the same way), per layer:

    PRE = 2 D + 2 · 3H · 32 bits,    POST = 2 D + 2 · H · 32 bits.

The exchanged widths: H·C = the hidden width in hidden layers (heads concatenated), H times
the classes in the last (heads averaged after the exchange).
"""

from __future__ import annotations

from supergcn.naming import PARAMETER_DTYPES

#: The training options that shape the model's rows, and those that set their wire format:
#: together, what :func:`row_costs` reads (``supergcn plan`` takes them as its own options).
SHAPE_OPTIONS = ("model", "num_layers", "hidden", "heads")
WIRE_OPTIONS = ("bits", "parameter_dtype")
#: The models whose PRE and POST rows cost differently, so that their hybrid plans hold a
#: cover of their own (:func:`row_costs` is None for the others).
WEIGHTED_COVER_MODELS = ("gat",)
#: Bits of a float32 scalar.
_FLOAT32_BITS = 32


def gat_exchange_widths(num_layers: int, hidden: int, heads: int, num_classes: int) -> list[int]:
    """The row width GAT exchanges in each layer (module docstring).

    Args:
        num_layers: graph convolutions.
        hidden: hidden width (all heads together).
        heads: H.
        num_classes: the classes.

    Returns:
        One width per layer.
    """
    return [hidden] * (num_layers - 1) + [heads * num_classes]


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
    if bits == _FLOAT32_BITS:
        return width * _FLOAT32_BITS
    return width * bits + 2 * 8 * PARAMETER_DTYPES[parameter_dtype]


def row_costs(model: str, num_layers: int, hidden: int, heads: int, num_classes: int, bits: int = 32,
              parameter_dtype: str = "bfloat16") -> tuple[int, int] | None:
    """The bits a PRE and a POST row cost in one training epoch of ``model`` (module
    docstring), or None where they cost the same.

    Args:
        model: one of :data:`supergcn.naming.GNN_MODELS`.
        num_layers: graph convolutions.
        hidden: hidden width.
        heads: GAT's heads.
        num_classes: the classes.
        bits: 32, or the quantized width of the exchanged rows (8, 4, 2).
        parameter_dtype: the wire type of the quantization parameters.

    Returns:
        ``(pre, post)`` bits, or None for the models whose rows cost the same.
    """
    if model not in WEIGHTED_COVER_MODELS:
        return None
    layers = gat_exchange_widths(num_layers, hidden, heads, num_classes)
    data = sum(2 * row_bits(width, bits, parameter_dtype) for width in layers)
    scalars = 2 * heads * _FLOAT32_BITS * len(layers)  # H per row and layer, forward and backward
    return data + 3 * scalars, data + scalars
