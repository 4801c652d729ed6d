"""The registry's other half: a compared method's state on one rank, built by its room's
runtime module (its :class:`~supergcn.methods.card.MethodCard`'s ``runtime``), which is
loaded by name here.

The cards (:mod:`supergcn.methods`) are read by the workflow, the tables and the figures,
which need no method's runtime; only the trainer builds one, through this module, so that
the rerun hash of a job that reads the cards covers no runtime code
(:data:`supergcn.sources.LOADED_BY_NAME`).
"""

from __future__ import annotations

import importlib

from supergcn.methods.card import MethodCard


def build_rank_method(method: MethodCard, context):
    """``method``'s state on this rank (collective where building it exchanges).

    Args:
        method: the run's method.
        context: the rank's :class:`~supergcn.train.steps.RankContext`.

    Returns:
        Its :class:`~supergcn.distributed.protocol.RankMethod`.
    """
    return importlib.import_module(f"{__package__}.{method.name}.{method.runtime}").build(context)
