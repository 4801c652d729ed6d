"""The compared methods, one room each: ``supergcn/methods/<name>/``, found here.

A room's package (``__init__.py``, standard library only) states the method's maths in its
docstring and holds its :class:`~supergcn.methods.card.MethodCard`: the options only it
reads, what selects it, what it cannot run with and the fix, how a study's variant and its
paper name it, what it adds to a run's metrics, memory and the performance model, and how a
rank builds its state, which plugs into the runtime through one protocol
(:mod:`supergcn.distributed.protocol`). Beside it, the method's per-rank code. Nothing
outside a room branches on a method: the trainer, the options, the variants' names, the
tables and the performance model ask the cards this registry lists. Adding a method is
adding its room, its test and its row in ``docs/methods.md``.

SuperGCN itself is the pipeline's default path, not a room here: its hybrid pre/post plan
by a minimum vertex cover (:mod:`supergcn.plan.builder`), its exchange with Int2/4/8
messages (:mod:`supergcn.distributed.rank_operators`, :mod:`supergcn.kernels.quantization`)
and its masked label propagation (:mod:`supergcn.train.labels`).

* :mod:`supergcn.methods.adaqp` — AdaQP's adaptive bit widths (``--bits adaptive``);
* :mod:`supergcn.methods.bnsgcn` — BNS-GCN's boundary rows sampled each epoch
  (``--boundary-rate p``);
* :mod:`supergcn.methods.distgnn` — DistGNN's delayed remote partial aggregates
  (``--schedule cd-<r>`` / ``0c``);
* :mod:`supergcn.methods.distgnn_mb` — DistGNN-MB's mini-batch training on each rank's own
  partition, halo rows from the cache its peers push into (``--batch-size B``);
* :mod:`supergcn.methods.mixgcn` — MixGCN's mixture of parallelism: the aggregation split by
  feature columns over a replicated adjacency, the update by rows (``--parallelism mop``);
* :mod:`supergcn.methods.pipegcn` — PipeGCN's rows and gradients one epoch stale, exchanged
  behind the next epoch's compute (``--schedule pipe|pipe-f|pipe-g|pipe-fg``);
* :mod:`supergcn.methods.sar` — SAR's sequential aggregation, one peer's rows at a time in
  both passes (``--sar sa|sar``).

``tests/test_layout.py`` holds this list to the rooms present.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from supergcn.methods.card import MODEL_NEEDS, MethodCard

__all__ = ["METHODS", "MODEL_NEEDS", "MethodCard", "added_values", "card", "method_cards", "method_of",
           "selected_methods"]


def _rooms() -> tuple[str, ...]:
    # The directories of supergcn/methods/ that are packages, listed without importing any.
    return tuple(sorted(path.parent.name for path in Path(__file__).parent.glob("*/__init__.py")))


#: The compared methods: one room each, in name order.
METHODS = _rooms()


def card(method: str) -> MethodCard:
    """The card of ``method``.

    Args:
        method: one of :data:`METHODS`.

    Returns:
        Its :class:`~supergcn.methods.card.MethodCard`.

    Raises:
        ValueError: an unknown method.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")
    return importlib.import_module(f"{__name__}.{method}").CARD


def method_cards() -> tuple[MethodCard, ...]:
    """Every method's card, in :data:`METHODS` order.

    Returns:
        The cards.
    """
    return tuple(card(name) for name in METHODS)


def selected_methods(values: dict) -> list[MethodCard]:
    """The methods that training options of these values select (a run may select one).

    Args:
        values: option name -> value (absent options at their defaults).

    Returns:
        Their cards, in :data:`METHODS` order.
    """
    return [method for method in method_cards() if method.selects(values)]


def method_of(values: dict) -> MethodCard | None:
    """The method a run of these option values is, or None for SuperGCN's own exchange.

    Args:
        values: option name -> value.

    Returns:
        The first selected method's card (:func:`selected_methods`; more than one is
        refused where the options are checked), or None.
    """
    chosen = selected_methods(values)
    return chosen[0] if chosen else None


def added_values(option: str) -> list[tuple]:
    """What the methods add to a shared training option (each card's ``values``).

    Args:
        option: the option (``schedule``, ``bits``).

    Returns:
        ``(values, meaning)`` of each method that adds some, in :data:`METHODS` order.
    """
    return [method.values[option] for method in method_cards() if option in method.values]
