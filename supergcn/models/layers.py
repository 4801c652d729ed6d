"""The layers of the GNN models, loaded by name: ``supergcn.models.<name>.layer``.

Each model's layer module holds ``Layer`` (an ``nn.Module`` built as ``Layer(in_dim,
out_dim, last=..., dense_dtype=..., aggregate_first=..., heads=..., attention_dropout=...)``,
each taking the options its model reads and ignoring the others, with ``forward(x, ops)``
returning the rows, or for a hidden layer a :class:`~supergcn.models.inputs.BiasedProduct`
that the activation sums as it reads it),
``pyg_conv(in_dim, out_dim, last, heads)``, PyG's counterpart of one layer, and
``copy_to_pyg(layer, conv)``, which gives it our parameters. The rerun hashes count every
model's layer in the code of whatever imports this module (:data:`supergcn.sources.LOADED_BY_NAME`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from supergcn.models import card


def layer_module(model: str) -> ModuleType:
    """The layer module of ``model``.

    Args:
        model: one of :data:`supergcn.naming.GNN_MODELS`.

    Returns:
        ``supergcn.models.<model>.layer``.

    Raises:
        ValueError: an unknown model.
    """
    card(model)  # the error of an unknown name
    return importlib.import_module(f"{__package__}.{model}.layer")
