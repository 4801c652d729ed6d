"""What the rest of the package asks of a compared method: its :class:`MethodCard`.

Standard library only: the workflow reads the cards while it parses (a variant's name, the
options its jobs read, the memory they request), and the training options are assembled
from them (:mod:`supergcn.train.config`) without loading torch.

A method is selected by the values of the training options (its card's ``selects``:
DistGNN's and PipeGCN's schedules, BNS-GCN's boundary rate, MixGCN's parallelism,
DistGNN-MB's batch size, AdaQP's bits); a run is SuperGCN's own exchange or one method.
Its card says, as data, what it cannot run with (bits, models, plans, inputs), which
options only it reads, how a study's variant names it and what its paper calls it, what it
adds to a run's metrics, a rank's memory and the performance model; and how a rank builds
its state (its card's ``runtime`` module), which plugs into the runtime through one protocol
(:mod:`supergcn.distributed.protocol`). Nothing outside a method's room branches on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from supergcn.models.card import no_conflicts

#: What a model must be for a method (:attr:`MethodCard.model_needs`): the
#: :class:`~supergcn.models.card.ModelCard` property, and the words of a refusal.
MODEL_NEEDS = {"linear_aggregation": "an aggregation that is a sum of rows",
               "delayable": "the mean aggregation",
               "trains_on_blocks": "a layer that runs on sampled blocks"}
#: How a method treats ``precompute_input`` (:attr:`MethodCard.precompute`): on by default where
#: its paper's scripts precompute layer 0 (``published``), taken as given (``allowed``), or
#: refused when asked for (``refused``).
PRECOMPUTE_RULES = ("published", "allowed", "refused")


def always(values: dict) -> bool:
    """A variant of any settings is the method as published.

    Args:
        values: the variant's options.

    Returns:
        True.
    """
    return True


@dataclass(frozen=True)
class MemoryTerms:
    """What a rank of the method holds beside its share of the graph.

    Args:
        what: the held thing, in words ("a copy of the whole adjacency").
        kept: ``(num_nodes, entries, kernel) -> bytes`` kept while training.
        peak: ``(num_nodes, entries) -> bytes`` at the peak of building it.
    """

    what: str
    kept: Callable[[int, int, str], int]
    peak: Callable[[int, int], int]


@dataclass(frozen=True)
class PerformanceTerms:
    """The method's terms in the plan-only performance model (:mod:`supergcn.perf.methods`).

    Args:
        row: its name in the ``perf_methods`` table (sampled rows add ``-<rate>``).
        exchange: what it moves: ``boundary`` (the post plan's rows, float32, layer 0
            precomputed), ``sequential`` (the same rows one peer at a time: SAR's) or
            ``transposes`` (MixGCN's row/column transposes).
        pipelined: its exchanges run behind the epoch's compute.
        sampled: it sends a share of the boundary rows, drawn each epoch.
    """

    row: str
    exchange: str
    pipelined: bool = False
    sampled: bool = False


@dataclass(frozen=True)
class VariantNaming:
    """How a study's variant names the method (:mod:`supergcn.variants`).

    Args:
        key: the variant entry's key that selects it (``schedule``, ``minibatch``); the
            method of a variant without one is found from its other settings (AdaQP's bits).
        group: the key's value is an object of the method's own options, its selecting
            option required (DistGNN-MB's ``minibatch: {batch_size: 1000}``); otherwise the
            value of the training option named ``key``.
        on: JSON schema keywords the selecting option takes in a group, which switch the
            method on (``minimum: 1``).
        value: the entry's value as the variant holds it (hashable; DistGNN-MB's settings).
        options: ``(value) -> {option: value}``, the training options the value sets.
        suffix: ``(value) -> str``, the name's suffix (``-cd-5``, ``-bns0.1``).
        pattern: a regular expression of the suffixes, no named groups.
        read: ``(suffix) -> value``, the inverse of ``suffix``.
        after_model: whether the suffix follows the model's in the name (``-gcn-mop``).
    """

    key: str | None = None
    group: bool = False
    on: dict = field(default_factory=dict)
    value: Callable[[Any], Any] = lambda value: value
    options: Callable[[Any], dict] | None = None
    suffix: Callable[[Any], str] = lambda value: ""
    pattern: str = ""
    read: Callable[[str], Any] = lambda text: text
    after_model: bool = False

    def options_of(self, value) -> dict:
        """The training options a variant's value sets (``{key: value}`` unless declared)."""
        return {self.key: value} if self.options is None else self.options(value)


@dataclass(frozen=True)
class MethodCard:
    """A compared method as the rest of the package sees it; its maths is its room's
    docstring (``supergcn/methods/<name>/__init__.py``), its per-rank code beside it.

    Args:
        name: the room's name.
        title: the method's name in prose and in its paper (``DistGNN``).
        option: the training option whose value selects it; its default switches it off.
        selects: ``(values) -> bool``, whether a run of these option values is this method.
        example: option values that select it (``{"schedule": "cd-5"}``), for the help and
            the tests that run every method.
        run_name: ``(values) -> str``, the paper's name of a run of these values
            (``DistGNN (cd-5)``); ``values`` hold the training options and ``strategy``.
        published: ``(values) -> bool``, whether a variant of these values is the method
            as published, which tables and figures name by :attr:`run_name`.
        options: the training options only this method reads, each ``(name, type,
            field)`` declared with :func:`supergcn.options.option` in its group ``name``.
        options_title: the title of their group in ``supergcn train --help``.
        values: values it adds to a shared option: option -> (a regular expression of
            them, or a tuple of words; what they mean, for the option's help), e.g.
            ``schedule``: ``cd-<r>|0c``, ``bits``: ``adaptive``.
        naming: how a study's variant names it.
        bits: the exchange precisions it runs with.
        precisions: the compute precisions it runs in (``--precision``; its exchanges take
            float32 rows unless it lists ``bf16``).
        model_needs: a :data:`MODEL_NEEDS` property the model must have, or None.
        strategies: the plans it runs on.
        model_strategies: ``(model card) -> plans``, where the plans it runs on depend on the
            model (SAR: any for a sum of rows, the post plan for attention); None: ``strategies``.
        plain_input: it needs the features themselves as the input (no label inputs or
            input LayerNorm).
        precompute: how it treats ``precompute_input`` (:data:`PRECOMPUTE_RULES`).
        aggregates_first: its layers aggregate before they transform.
        rounding: how it rounds quantized rows as published (:data:`~supergcn.naming.ROUNDINGS`):
            what ``--rounding auto`` picks in its runs.
        ignores: general training options its runs do not read.
        conflicts: ``(settings) -> list[str]``, what else it cannot run with, each with its fix.
        runtime: the module of its room whose ``build(context)`` makes its state on one rank
            (a :class:`~supergcn.distributed.protocol.RankMethod`, collectively) from the
            trainer's :class:`~supergcn.train.steps.RankContext`; loaded by name
            (:mod:`supergcn.methods.runtime`), so that reading the card loads no runtime.
        header_key: the metrics header's entry of its layout (:meth:`RankMethod.header`), or None.
        memory: what a rank holds beside its share, or None.
        performance: its terms in the performance model, or None.
    """

    name: str
    title: str
    option: str
    selects: Callable[[dict], bool]
    example: dict
    run_name: Callable[[dict], str]
    runtime: str
    published: Callable[[dict], bool] = always
    options: tuple = ()
    options_title: str = ""
    values: dict = field(default_factory=dict)
    naming: VariantNaming = VariantNaming()
    bits: tuple = (32,)
    precisions: tuple[str, ...] = ("fp32",)
    model_needs: str | None = None
    strategies: tuple[str, ...] = ("pre", "post", "hybrid")
    model_strategies: Callable[[Any], tuple[str, ...]] | None = None
    plain_input: bool = False
    precompute: str = "allowed"
    aggregates_first: bool = False
    rounding: str = "nearest"
    ignores: tuple[str, ...] = ()
    conflicts: Callable[[Any], list[str]] = no_conflicts
    header_key: str | None = None
    memory: MemoryTerms | None = None
    performance: PerformanceTerms | None = None

    def plans_for(self, model) -> tuple[str, ...]:
        """The plans it runs on with ``model``.

        Args:
            model: the model's :class:`~supergcn.models.card.ModelCard`.

        Returns:
            Their strategies, the one to suggest first.
        """
        return self.strategies if self.model_strategies is None else self.model_strategies(model)

    @property
    def option_names(self) -> tuple[str, ...]:
        """The names of the training options only this method reads."""
        return tuple(name for name, _, _ in self.options)
