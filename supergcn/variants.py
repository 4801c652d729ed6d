"""A study's training variants: what each trains, and the name that stands for it in paths,
tables and figures.

A variant is a plan's strategy, the bits of exchanged rows, label propagation on or off, the
GNN model and at most one compared method (:mod:`supergcn.methods`) with its setting. Its
name (:attr:`Variant.name`) is ``strategy-precision-lp``, then the method's suffix where its
card puts it before the model's, the model where it is not GraphSAGE, then the method's
suffix where its card puts it after: ``pre-fp32-nolp-cd-5``, ``post-fp32-nolp-bns0.1``,
``hybrid-fp32-nolp-gcn-mop``, ``hybrid-fp32-nolp-mb1000``. Tables, figures and logs show
what its paper calls it where the variant is the method as published (:func:`display_name`).

Standard library only: the Snakefile parses names while it reads the workflow. Every pattern
and key here is derived from the methods' cards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from supergcn.methods import MethodCard, added_values, method_cards, method_of
from supergcn.naming import (
    DEFAULT_MODEL,
    GNN_MODELS,
    LABEL_PROPAGATION,
    PRECISIONS,
    STRATEGIES,
    precision_bits,
    precision_name,
)

#: Everything ``bits`` may be: a precision, or a word a method adds (AdaQP's ``adaptive``).
BIT_CHOICES = (*PRECISIONS, *(word for words, _ in added_values("bits") for word in words))
#: The methods a variant's entry names by a key of its own, in name order.
NAMED = tuple(method for method in method_cards() if method.naming.key is not None)
#: The keys a study's variant entry may have beside a method's.
BASE_KEYS = ("strategy", "bits", "label_propagation", "model")


def _suffixes(after_model: bool) -> str:
    return "|".join(f"(?:{method.naming.pattern})" for method in NAMED if method.naming.after_model == after_model)


_BASE = (f"({'|'.join(STRATEGIES)})-({'|'.join(precision_name(bits) for bits in BIT_CHOICES)})-"
         f"({'|'.join(LABEL_PROPAGATION.values())})")
_MODELS = "|".join(m for m in GNN_MODELS if m != DEFAULT_MODEL)
#: A variant's name (:attr:`Variant.name`), as the workflow's wildcards and the schema take it.
VARIANT_PATTERN = f"{_BASE}(?:{_suffixes(False)})?(?:-(?:{_MODELS}))?(?:{_suffixes(True)})?"
_PARSED = re.compile(f"{_BASE}(?P<before>{_suffixes(False)})?(?:-(?P<model>{_MODELS}))?(?P<after>{_suffixes(True)})?")
#: The variants the paper names (ICS '25 Fig. 12 and Table 3): SuperGCN without and with
#: its communication optimisations. A compared method's published variants are named by its card.
PAPER_NAMES = {"post-fp32-nolp": "SuperGCN w/o comm optimizations",
               "hybrid-int2-lp": "SuperGCN w/ comm optimizations"}
#: What a run of SuperGCN's own exchange is called.
SUPERGCN = "SuperGCN"


@dataclass(frozen=True)
class Variant:
    """A training variant of the study (module docstring).

    Args:
        strategy: how cut edges are served (:data:`~supergcn.naming.STRATEGIES`).
        bits: the bits of exchanged rows, or a word a method adds (``adaptive``).
        label_propagation: masked label propagation on or off.
        model: the GNN model.
        setting: ``(key, value)`` of the method the variant's entry names by a key of its
            own (``("schedule", "cd-5")``, ``("minibatch", MiniBatch(1000))``), or None.
    """

    strategy: str
    bits: int | str
    label_propagation: bool
    model: str = DEFAULT_MODEL
    setting: tuple[str, Any] | None = None

    def options(self) -> dict:
        """The training options the variant sets (beside label propagation's rate).

        Returns:
            ``bits``, ``model`` and the method's options.
        """
        named = {} if self.setting is None else _named(self.setting).naming.options_of(self.setting[1])
        return {"bits": self.bits, "model": self.model, **named}

    def values(self) -> dict:
        """What a method's card reads of the variant (its ``run_name`` and ``published``).

        Returns:
            :meth:`options`, ``strategy`` and ``label_propagation``.
        """
        return {**self.options(), "strategy": self.strategy, "label_propagation": self.label_propagation}

    @property
    def method(self) -> MethodCard | None:
        """The method the variant runs, or None for SuperGCN's own exchange."""
        return method_of(self.options())

    @property
    def name(self) -> str:
        """The label in paths, tables and figures (module docstring)."""
        before = after = ""
        if self.setting is not None:
            naming = _named(self.setting).naming
            suffix = naming.suffix(self.setting[1])
            before, after = ("", suffix) if naming.after_model else (suffix, "")
        model = "" if self.model == DEFAULT_MODEL else f"-{self.model}"
        base = f"{self.strategy}-{precision_name(self.bits)}-{LABEL_PROPAGATION[bool(self.label_propagation)]}"
        return base + before + model + after

    @classmethod
    def from_config(cls, entry: dict, model: str = DEFAULT_MODEL) -> Variant:
        """The variant of one entry of the config's ``variants`` list; ``model`` is the
        study's (``training.model``), which the entry's own ``model`` overrides.

        Raises:
            ValueError: the entry names more than one method.
        """
        settings = [(key, value) for key, value in entry.items() if key not in BASE_KEYS]
        chosen = []
        for key, value in settings:
            method = next((m for m in NAMED if m.naming.key == key and m.selects(m.naming.options_of(
                m.naming.value(value)))), None)
            if method is not None:
                chosen.append((method, (key, method.naming.value(value))))
        if len(chosen) > 1:
            raise ValueError("a variant runs one compared method, not " + " and ".join(
                f"{method.title} ({key}: {entry[key]})" for method, (key, _) in chosen) + " — keep one")
        return cls(entry["strategy"], entry["bits"], entry["label_propagation"], entry.get("model", model),
                   chosen[0][1] if chosen else None)

    @classmethod
    def from_options(cls, strategy: str, options: dict) -> Variant:
        """The variant of a run with these training options (a metrics header's ``config``).

        Args:
            strategy: the plan's strategy.
            options: option name -> value, every option of ``supergcn train``.

        Returns:
            The variant.
        """
        method = method_of(options)
        setting = None
        if method is not None and method.naming.key is not None:
            naming = method.naming
            value = ({name: options[name] for name in method.option_names if name in options} if naming.group
                     else options[naming.key])
            setting = (naming.key, naming.value(value))
        return cls(strategy, options["bits"], options["label_rate"] > 0, options["model"], setting)

    @classmethod
    def parse(cls, name: str) -> Variant:
        """The inverse of :attr:`name`.

        Raises:
            ValueError: not a variant's name, or one spelled otherwise (a mini-batch setting
                spelled at its default).
        """
        match = _PARSED.fullmatch(name)
        if match is None or (match["before"] and match["after"]):
            raise ValueError(f"{name!r} is not a variant name such as hybrid-int2-lp, pre-fp32-nolp-cd-5, "
                             "post-fp32-nolp-bns0.1, hybrid-fp32-nolp-gat, hybrid-fp32-nolp-mop or "
                             "hybrid-fp32-nolp-mb1000")
        strategy, precision, lp = match.group(1, 2, 3)
        model = match["model"] or DEFAULT_MODEL
        suffix = match["before"] or match["after"]
        setting = None
        if suffix:
            method = next(m for m in NAMED if re.fullmatch(m.naming.pattern, suffix)
                          and m.naming.after_model == bool(match["after"]))
            setting = (method.naming.key, method.naming.read(suffix))
        variant = cls(strategy, precision_bits(precision), lp == LABEL_PROPAGATION[True], model, setting)
        if variant.name != name:
            raise ValueError(f"{name!r} is variant {variant.name} spelled otherwise (a name leaves out each "
                             "mini-batch setting at its default)")
        return variant


def _named(setting: tuple[str, Any]) -> MethodCard:
    """The method a variant's ``(key, value)`` names."""
    key, value = setting
    return next(m for m in NAMED if m.naming.key == key and m.selects(m.naming.options_of(value)))


def display_name(variant: str, options: dict | None = None) -> str:
    """What tables, figures and logs call a variant: its paper's name where it is SuperGCN's
    configuration of the paper (:data:`PAPER_NAMES`) or a compared method as published (the
    card's ``run_name``: "DistGNN (cd-5)", "BNS-GCN
    (p = 0.1)", "MixGCN", "DistGNN-MB (gat, push0)", "AdaQP w/ LP"), else its label.

    Args:
        variant: a variant's name.
        options: the run's training options (its metrics header's ``config``), which a
            card's ``published`` may read beyond what the name says (AdaQP's rounding);
            None: the name alone.

    Returns:
        The name to show.
    """
    parsed = Variant.parse(variant)
    method = parsed.method
    if method is None:
        return PAPER_NAMES.get(variant, variant)
    values = {**(options or {}), **parsed.values()}
    return method.run_name(values) if method.published(values) else variant


def run_name(values: dict) -> str:
    """What the first line of a run calls it: its method's paper name, or SuperGCN.

    Args:
        values: the run's training options, its plan's ``strategy`` and ``label_propagation``.

    Returns:
        The name.
    """
    method = method_of(values)
    return SUPERGCN if method is None else method.run_name(values)
