"""The GNN models, one home each: ``supergcn/models/<name>/``.

A model's package (``__init__.py``, standard library only) states its maths in its
docstring and holds its :class:`~supergcn.models.card.ModelCard`: its width rule, what each
layer exchanges (the rows and scalars the plan's cover and the performance model price), the
training options only it reads, its own training defaults and what it cannot train with.
Beside it, ``layer.py`` holds its layer, its normalisation and its PyG counterpart
(:mod:`supergcn.models.layers`). Nothing outside a model's home branches on its name: the
rest of the package asks the card. Adding a model is adding its directory, its test and
its row in ``docs/methods.md``; the names (:data:`supergcn.naming.GNN_MODELS`) are the
directories found here.
"""

from __future__ import annotations

import importlib

from supergcn.models.card import ModelCard
from supergcn.naming import GNN_MODELS


def card(model: str) -> ModelCard:
    """The card of ``model``.

    Args:
        model: one of :data:`supergcn.naming.GNN_MODELS`.

    Returns:
        Its :class:`~supergcn.models.card.ModelCard`.

    Raises:
        ValueError: an unknown model.
    """
    if model not in GNN_MODELS:
        raise ValueError(f"unknown model {model!r}: choose one of {', '.join(GNN_MODELS)}")
    return importlib.import_module(f"{__name__}.{model}").CARD


def weighted_cover_models() -> tuple[str, ...]:
    """The models whose PRE and POST rows cost differently, so that their hybrid plans hold
    a cover of their own (:attr:`~supergcn.models.card.ModelCard.weighted_cover`).

    Returns:
        Their names.
    """
    return tuple(name for name in GNN_MODELS if card(name).weighted_cover)
