"""What a training run cannot do, one message and its fix per problem, derived from the
option declarations and the cards.

* a value an option does not take (:func:`supergcn.options.problems`);
* what the model cannot train with (its card's ``conflicts``);
* more than one compared method: a run is SuperGCN's own exchange or one method;
* what the run's method cannot run with, read from its card as data: the precisions it
  exchanges and computes in, what a model must be for it, the plain input it needs, a precomputed layer 0
  it refuses, and anything else its card says;
* layer 0 precomputed where the input or the aggregation cannot be;
* an option set to something other than its default where the run does not read it
  (:func:`supergcn.train.config.option_read`; the command line refuses one given at all,
  :func:`unread_options`).

Standard library only: the workflow checks its variants with these while it parses.
"""

from __future__ import annotations

from supergcn.methods import MODEL_NEEDS, method_cards, selected_methods
from supergcn.models import card
from supergcn.naming import GNN_MODELS
from supergcn.options import declared, is_read, problems


def flag(name: str) -> str:
    """An option's command-line flag: ``--batch-size`` of ``batch_size``."""
    return "--" + name.replace("_", "-")


def switched_on(method, settings) -> str:
    """How a refusal names a run's method: its option's value and its title,
    ``--schedule cd-5 (DistGNN)``."""
    return f"{flag(method.option)} {getattr(settings, method.option)} ({method.title})"


def _spec(settings, name: str) -> dict:
    """Option ``name``'s declaration in the settings' class."""
    return type(settings).__dataclass_fields__[name].metadata["option"]


def switched_off(method, settings) -> str:
    """The fix that leaves the method out: its option at its default, ``--schedule sync``."""
    value = type(settings).__dataclass_fields__[method.option].default
    return flag(method.option) if value is True else f"{flag(method.option)} {value}"


def method_conflicts(method, settings, model) -> list[str]:
    """What the run's ``method`` cannot run with (module docstring), from its card.

    Args:
        method: its :class:`~supergcn.methods.card.MethodCard`.
        settings: the run's options.
        model: the model's :class:`~supergcn.models.card.ModelCard`.

    Returns:
        One message with its fix per problem.
    """
    what, off = switched_on(method, settings), f"or {switched_off(method, settings)}"
    found = []
    if settings.bits not in method.bits:
        rows = " or ".join("float32" if bits == 32 else f"{bits}" for bits in method.bits)
        takes = " or ".join(f"--bits {bits}" for bits in method.bits)
        found.append(f"{what} sends {rows} rows, not {settings.bits}-bit ones — use {takes} {off}")
    if settings.precision not in (*method.precisions, "auto"):
        takes = " or ".join(f"--precision {name}" for name in method.precisions)
        found.append(f"{what} computes in {' or '.join(method.precisions)}, not {settings.precision} — use {takes} "
                     f"{off}")
    if method.model_needs is not None and not getattr(model, method.model_needs):
        having = " or ".join(name for name in GNN_MODELS if getattr(card(name), method.model_needs))
        found.append(f"{what} needs {MODEL_NEEDS[method.model_needs]}, which {model.title} is not — use --model "
                     f"{having} {off}")
    if method.plain_input and not settings.input_is_plain:
        found.append(f"{what} takes the features themselves as layer 0's input — leave out label propagation "
                     f"(--label-rate 0) and --input-norm {off}")
    if method.precompute == "refused" and settings.precompute_input == "on":
        found.append(f"{what} does not take a precomputed layer 0 — use --precompute-input off {off}")
    return found + method.conflicts(settings)


def run_conflicts(settings) -> list[str]:
    """Every problem of a run's options (module docstring).

    Args:
        settings: the run's :class:`~supergcn.train.config.TrainConfig`.

    Returns:
        The messages; empty when the run can go ahead.
    """
    found = problems(settings)
    model = card(settings.model)
    found += model.conflicts(settings)
    values = settings.values()
    chosen = selected_methods(values)
    if len(chosen) > 1:
        found.append("a run is SuperGCN's exchange or one compared method, not "
                     + " and ".join(switched_on(method, settings) for method in chosen)
                     + " — keep one, " + " or ".join(switched_off(method, settings) for method in chosen))
    for method in chosen:
        found += method_conflicts(method, settings, model)
    if settings.precompute_input == "on" and not (settings.input_is_plain and model.linear_aggregation):
        found.append("--precompute-input on needs the plain features as layer 0's input and a sum of rows as its "
                     "aggregation — leave out label propagation and --input-norm, use --model "
                     + " or ".join(name for name in GNN_MODELS if card(name).linear_aggregation)
                     + ", or --precompute-input off")
    found += [unread_message(settings, field.name) for field, spec in declared(settings)
              if values[field.name] != field.default and not is_read(spec, values)]
    return found


def unread_message(settings, name: str) -> str:
    """The refusal of option ``name`` where a run of these settings does not read it.

    Args:
        settings: the run's options.
        name: the option.

    Returns:
        The message, with what would make the run read it.
    """
    spec, value = _spec(settings, name), getattr(settings, name)
    owner = next((method for method in method_cards() if name in method.option_names), None)
    hint = spec["read_hint"] or (f"{owner.title}'s runs ({flag(owner.option)})" if owner is not None else None)
    return (f"{flag(name)} {value} is not read by this run" + (f" (only by {hint})" if hint else "")
            + " — leave it out")


def unread_options(given: dict, settings) -> list[str]:
    """The refusals of options given at their defaults (on the command line or in a settings
    file) that the run does not read (those set otherwise are among :func:`run_conflicts`):
    they would change nothing, so a user who gives one expects a run that reads it. A
    method's own selecting option at its default (``--batch-size 0``) is not refused: it
    says that method is off.

    Args:
        given: option name -> value, as given.
        settings: the run's :class:`~supergcn.train.config.TrainConfig`.

    Returns:
        One message per such option.
    """
    values = settings.values()
    selectors = {method.option for method in method_cards()}
    fields = type(settings).__dataclass_fields__
    return [unread_message(settings, name) for name in given
            if values[name] == fields[name].default and not is_read(_spec(settings, name), values)
            and name not in selectors]
