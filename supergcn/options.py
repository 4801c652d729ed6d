"""Options written once: what values an option takes, and the option with everything about it.

A training option is one field of :class:`~supergcn.train.config.TrainConfig`, a partition
option one of :class:`~supergcn.partition.config.PartitionConfig`, declared with
:func:`option`: its default, its help, the values it takes (choices or a :class:`Range`),
its group on the command line, whether a study's config sets it and whether it changes the
training trajectory. Everything else is derived from that declaration:

* the command line of ``supergcn train`` and ``supergcn partition`` (:func:`add_arguments`),
  and the words of it a workflow rule writes (:func:`command_line`);
* the ``training`` and ``partition`` sections of the study config's schema
  (:func:`schema_properties`), and with them the defaults a study gets for keys it leaves out;
* the keys of a checkpoint's trajectory fingerprint (:func:`trajectory_keys`);
* the check of a value of the API (:func:`problems`).

Standard library only: Snakemake reads the schema while it parses the Snakefile.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Range:
    """Numbers of ``kind`` (int or float) from ``low`` to ``high``, each end included unless
    open; ``what`` names them in an error ("a percentage"). Called on a text, it is an
    argparse type.

    Args:
        kind: ``int`` or ``float``; a text is converted with it.
        low: the lower end (None: unbounded).
        high: the upper end (None: unbounded).
        low_open: whether ``low`` itself is left out.
        high_open: whether ``high`` itself is left out.
        what: what the numbers are, for :meth:`describe`.
    """

    kind: type
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    what: str = ""

    @property
    def __name__(self) -> str:  # argparse names the type in its own errors
        return self.kind.__name__

    def contains(self, value) -> bool:
        """Whether ``value`` lies in the range (NaN lies in none).

        Args:
            value: a number.

        Returns:
            True when ``value`` lies between the ends, as open or closed as declared.
        """
        return ((self.low is None or (value > self.low if self.low_open else value >= self.low))
                and (self.high is None or (value < self.high if self.high_open else value <= self.high)))

    def describe(self) -> str:
        """The range in words: "at least 1", "a number >= 0", "in [0, 1)".

        Returns:
            The words, for help texts and error messages.
        """
        if self.high is None and self.kind is int:
            return f"at least {self.low}"
        if self.high is None:
            return f"a number {'>' if self.low_open else '>='} {self.low:g}"
        span = f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        return f"{self.what + ' ' if self.what else ''}in {span}"

    def __call__(self, text: str):
        """Parse a command-line text as an argparse ``type``.

        Args:
            text: the argument's text.

        Returns:
            The text as ``kind``.

        Raises:
            argparse.ArgumentTypeError: the value lies outside the range.
            ValueError: the text is not a number of ``kind``.
        """
        value = self.kind(text)
        if not self.contains(value):
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text}")
        return value

    def schema(self) -> dict:
        """The range as JSON schema keywords.

        Returns:
            ``type`` (``integer`` or ``number``) and the bounds as ``minimum`` /
            ``exclusiveMinimum`` and ``maximum`` / ``exclusiveMaximum``.
        """
        keywords: dict[str, Any] = {"type": "integer" if self.kind is int else "number"}
        if self.low is not None:
            keywords["exclusiveMinimum" if self.low_open else "minimum"] = self.low
        if self.high is not None:
            keywords["exclusiveMaximum" if self.high_open else "maximum"] = self.high
        return keywords


#: The command line's groups of training options, in the order ``--help`` lists them.
GROUPS = {"io": "inputs and outputs", "model": "model and optimisation (defaults: the paper's Table 2)",
          "execution": "execution", "exchange": "boundary exchange while training (evaluation is always float32)",
          "minibatch": "DistGNN-MB's mini-batch training with a historical embedding cache (--batch-size above 0)"}


def option(default, help: str | None = None, *, values: Range | Callable | None = None, choices=None,
           group: str = "model", study: bool = False, trajectory: bool = False, per_dataset: bool = False,
           study_values: Range | None = None, study_default=None, read_when: Callable[[dict], bool] | None = None,
           read_hint: str | None = None, pattern: str | None = None, pattern_message: str | None = None,
           required: bool = False):
    """A dataclass field declaring an option (module docstring).

    Args:
        default: the default (for a study too, where its config leaves the key out).
        help: the command line's help; None hides the option from ``--help``.
        values: a :class:`Range`, or a callable that parses the command line's text.
        choices: the values allowed (of each value, for an option taking several).
        group: the command line's group (a key of the groups :func:`add_arguments` is
            given: :data:`GROUPS` for the training options).
        study: a study's config sets it (part of its section of the schema).
        trajectory: a change of it changes what is trained (part of the fingerprint).
        per_dataset: ``training_by_dataset`` may set it per dataset.
        study_values: the study's range where it is narrower than the command line's.
        study_default: the study's default where it differs from ``default``.
        read_when: given every option's value, whether this one is read at all (only
            then is it in the fingerprint, and in a study's job settings; a run given it
            where it is not read refuses it).
        read_hint: what makes it read, in the words of a refusal (``--model gat``).
        pattern: a regular expression its text matches (the schema's ``pattern``).
        pattern_message: what the pattern takes, in the words of the schema's refusal.
        required: the command line requires it (no default).

    Returns:
        A :func:`dataclasses.field` with ``default``, its declaration under the
        ``option`` key of its metadata.
    """
    metadata = {"help": help, "values": values, "choices": choices, "group": group, "study": study,
                "trajectory": trajectory, "per_dataset": per_dataset, "study_values": study_values,
                "study_default": default if study_default is None else study_default, "read_when": read_when,
                "read_hint": read_hint, "pattern": pattern, "pattern_message": pattern_message,
                "required": required}
    return dataclasses.field(default=default, metadata={"option": metadata})


def declared(cls) -> list[tuple[dataclasses.Field, dict]]:
    """The options of the dataclass ``cls``, with their declarations, in field order.

    Args:
        cls: a dataclass (or an instance of one).

    Returns:
        (field, declaration) for each field declared with :func:`option`; other fields are
        left out.
    """
    return [(field, field.metadata["option"]) for field in dataclasses.fields(cls) if "option" in field.metadata]


def _annotation(field: dataclasses.Field) -> list[str]:
    """The types of a field's annotation, as written: ``["bool", "None"]`` of ``bool | None``."""
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    return kind.split(" | ")


def _type_name(field: dataclasses.Field) -> str:
    """The first type of a field's annotation, by name: ``int`` of ``int | str``, ``Path``,
    ``tuple`` of ``tuple[str, ...]`` (an option taking several values)."""
    return _annotation(field)[0].split("[")[0].rpartition(".")[2]


def _nullable(field: dataclasses.Field) -> bool:
    """Whether a field's annotation allows None (``bool | None``)."""
    return "None" in _annotation(field)


def _shown(value) -> str:
    """A default as the command line writes it: several values separated by spaces."""
    return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def add_arguments(parser: argparse.ArgumentParser, cls, file_type: Callable | None = None,
                  only: tuple[str, ...] | None = None, groups: dict[str, str] = GROUPS) -> None:
    """One argument per option of ``cls``: ``--name-with-dashes``, a boolean as
    ``--x/--no-x``, a tuple as ``--x [A ...]``, in its group. ``file_type`` checks the
    options that name files to write (``Path`` fields of the ``io`` and ``execution`` groups).

    Args:
        parser: the parser to add the arguments to (one argument group per key of
            ``groups``, where it has options).
        cls: the dataclass whose options become arguments.
        file_type: an argparse type for the files the run writes; None keeps ``Path``.
        only: the options to add (another command reading some of them); None for all.
        groups: the command line's groups, key -> title, in the order ``--help`` lists
            them (:data:`GROUPS`, the training options').
    """
    options = [(field, spec) for field, spec in declared(cls) if only is None or field.name in only]
    groups = {key: parser.add_argument_group(title) for key, title in groups.items()
              if any(spec["group"] == key for _, spec in options)}
    for field, spec in options:
        flag = "--" + field.name.replace("_", "-")
        kind = _type_name(field)
        shown = spec["help"] if field.default is None else f"{spec['help']} (default: {_shown(field.default)})"
        arguments: dict[str, Any] = {"help": argparse.SUPPRESS if spec["help"] is None else shown}
        if spec["required"]:
            arguments["required"] = True
        else:  # absent unless given, so that a settings file can fill it (:func:`values_given`)
            arguments["default"] = argparse.SUPPRESS
        if kind == "bool" and spec["values"] is None:
            arguments["action"] = argparse.BooleanOptionalAction
        else:
            if kind == "tuple":
                arguments["nargs"] = "*"
            arguments["type"] = spec["values"] or {"int": int, "float": float, "str": str, "Path": Path,
                                                   "tuple": str}[kind]
            if kind == "Path" and file_type is not None and field.name != "init_weights" and spec["group"] != "io":
                arguments["type"] = file_type
            if spec["choices"] is not None:
                arguments["choices"] = spec["choices"]
        groups[spec["group"]].add_argument(flag, **arguments)


def values_given(namespace: argparse.Namespace, cls) -> dict:
    """The options of ``cls`` the command line gave (see :func:`add_arguments`).

    Args:
        namespace: the parsed arguments.
        cls: the dataclass whose options were added to the parser.

    Returns:
        Option name -> value, for the options given on the command line.
    """
    return {field.name: getattr(namespace, field.name) for field, _ in declared(cls) if hasattr(namespace, field.name)}


def from_values(cls, values: dict, source: str):
    """An instance of ``cls`` from option ``values`` read from ``source`` (a settings file):
    unknown keys refused, names of files made paths.

    Args:
        cls: the dataclass to build.
        values: option name -> value.
        source: where the values come from, for the error message.

    Returns:
        ``cls(**values)``, ``Path`` fields holding paths.

    Raises:
        SuperGCNError: ``values`` holds a key that is no option of ``cls``.
    """
    from supergcn.errors import SuperGCNError

    fields = {field.name: field for field, _ in declared(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise SuperGCNError(f"{source} sets {', '.join(unknown)}, which {cls.__name__} does not have",
                            "use the options of `supergcn train --help` (written with underscores)")
    converted = {name: Path(value) if _type_name(fields[name]) == "Path" and value is not None else value
                 for name, value in values.items()}
    return cls(**converted)


def command_line(cls, values: dict) -> list[str]:
    """The command-line words that give options of ``cls`` the ``values`` (what
    :func:`add_arguments` parses back): ``--x value``, a boolean as ``--x`` or ``--no-x``,
    several values as ``--x a b``; a None is left out (the default applies).

    Args:
        cls: the dataclass whose options the command takes.
        values: option name -> value (a study's section of them).

    Returns:
        The words, in field order, each a separate argument (not quoted for a shell).

    Raises:
        ValueError: ``values`` holds a key that is no option of ``cls``.
    """
    fields = {field.name: field for field, _ in declared(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: no option of {cls.__name__}")
    words = []
    for name in (name for name in fields if name in values and values[name] is not None):
        flag, value = "--" + name.replace("_", "-"), values[name]
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + flag[2:])
        else:
            words += [flag, *map(str, value if _type_name(fields[name]) == "tuple" else [value])]
    return words


def option_schema(field: dataclasses.Field, spec: dict) -> dict:
    """The JSON schema of one option as a study's config sets it.

    Args:
        field: the option's field.
        spec: its declaration (:func:`declared`).

    Returns:
        ``enum``, a range, a pattern or a type; ``default``; the help as ``description``.
    """
    values = spec["study_values"] or spec["values"]
    if spec["choices"] is not None:
        keywords: dict[str, Any] = {"enum": list(spec["choices"])}
    elif isinstance(values, Range):
        keywords = values.schema()
    elif spec["pattern"] is not None:
        keywords = {"type": "string", "pattern": f"^({spec['pattern']})$"}
        if spec["pattern_message"] is not None:
            keywords["message"] = "{value} is not " + spec["pattern_message"]
    else:
        json_types = {"bool": "boolean", "int": "integer", "float": "number", "str": "string", "tuple": "string"}
        keywords = {"type": json_types[_type_name(field)]}
        if _nullable(field):
            keywords["type"] = [keywords["type"], "null"]
    default = spec["study_default"]
    if _type_name(field) == "tuple":  # several distinct values, each as above
        keywords, default = {"type": "array", "uniqueItems": True, "items": keywords}, list(default)
    return {**keywords, "default": default, "description": spec["help"] or ""}


def schema_properties(cls, per_dataset: bool = False) -> dict:
    """JSON schema ``properties`` of the options a study sets (only those it may set per
    dataset, with ``per_dataset``), each with its default.

    Args:
        cls: the dataclass whose options are described.
        per_dataset: whether to keep only the options that ``training_by_dataset`` may set.

    Returns:
        Option name -> JSON schema (``enum``, a range or a type; ``default``; the help as
        ``description``).
    """
    return {field.name: option_schema(field, spec) for field, spec in declared(cls)
            if spec["study"] and (spec["per_dataset"] or not per_dataset)}


def is_read(spec: dict, values: dict) -> bool:
    """Whether an option declared as ``spec`` is read when the options hold ``values``.

    Args:
        spec: the option's declaration (:func:`declared`).
        values: every option's value, by name.

    Returns:
        True unless its ``read_when`` says otherwise for ``values``.
    """
    return spec["read_when"] is None or spec["read_when"](values)


def trajectory_keys(instance) -> list[str]:
    """The options of ``instance`` whose change changes what is trained (those read only
    under another option's value, only then).

    Args:
        instance: an instance of a dataclass of options (a
            :class:`~supergcn.train.config.TrainConfig`).

    Returns:
        Their names, in field order.
    """
    values = dataclasses.asdict(instance)
    return [field.name for field, spec in declared(type(instance)) if spec["trajectory"] and is_read(spec, values)]


def problems(instance) -> list[str]:
    """One message per option of ``instance`` whose value is not one it takes.

    Args:
        instance: an instance of a dataclass of options.

    Returns:
        The messages (empty when every value is allowed), each naming the option's flag,
        what it takes and the value given.
    """
    found = []
    for field, spec in declared(type(instance)):
        value = getattr(instance, field.name)
        flag = "--" + field.name.replace("_", "-")
        several = _type_name(field) == "tuple"
        if spec["choices"] is not None and any(item not in spec["choices"] for item in (value if several else [value])):
            found.append(f"{flag} must be {'each ' if several else ''}one of {', '.join(map(str, spec['choices']))}, "
                         f"got {value!r}")
        elif isinstance(spec["values"], Range) and value is not None and not spec["values"].contains(value):
            found.append(f"{flag} must be {spec['values'].describe()}, got {value}")
    return found
