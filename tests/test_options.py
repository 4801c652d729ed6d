"""Options declared once (supergcn.options): what the command line, the study schema, the
settings files and the trajectory fingerprint derive from a declaration."""

import argparse
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from supergcn.errors import SuperGCNError
from supergcn.options import (
    Range,
    add_arguments,
    command_line,
    from_values,
    option,
    problems,
    schema_properties,
    trajectory_keys,
    values_given,
)
from supergcn.train.config import TrainConfig, job_settings
from supergcn.variants import Variant


@pytest.mark.parametrize("values, text, message", [
    (Range(int, 1), "0", "must be at least 1, got 0"),
    (Range(float, 0), "-0.5", "must be a number >= 0, got -0.5"),
    (Range(float, 0, low_open=True), "0", "must be a number > 0, got 0"),
    (Range(float, 0, 1, high_open=True), "1", "must be in [0, 1), got 1"),
    (Range(float, 0, 100, low_open=True, what="a percentage"), "0", "must be a percentage in (0, 100], got 0"),
    (Range(float, 0, 1), "nan", "must be in [0, 1], got nan"),
])
def test_a_range_refuses_what_lies_outside_it(values, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        values(text)


def test_a_range_as_json_schema():
    assert Range(int, 1).schema() == {"type": "integer", "minimum": 1}
    assert Range(float, 0, 1, low_open=True, high_open=True).schema() == {
        "type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}


@dataclass
class Toy:
    """A made-up config: the declarations the derivations read."""

    out: Path = option(None, "where to write", group="io", required=True)
    width: int = option(8, "width", values=Range(int, 1), study=True, trajectory=True, per_dataset=True)
    mode: str = option("a", "mode", choices=("a", "b"), study=True, trajectory=True)
    fast: bool = option(True, "go fast", group="execution", study=True)
    knob: float = option(0.5, "read in mode b only", values=Range(float, 0, 1), study=True, trajectory=True,
                         read_when=lambda values: values["mode"] == "b")
    secret: int = option(0, group="execution")


def test_the_command_line_takes_what_is_given_and_leaves_the_rest_to_the_defaults():
    parser = argparse.ArgumentParser()
    add_arguments(parser, Toy)
    given = values_given(parser.parse_args(["--out", "o", "--no-fast", "--width", "3"]), Toy)
    assert given == {"out": Path("o"), "fast": False, "width": 3}
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "o", "--mode", "c"])
    assert "--secret" not in parser.format_help(), "an option without help is hidden"
    assert "width (default: 8)" in parser.format_help()


def test_the_study_schema_holds_the_study_options_with_their_defaults():
    properties = schema_properties(Toy)
    assert list(properties) == ["width", "mode", "fast", "knob"]
    assert properties["width"] == {"type": "integer", "minimum": 1, "default": 8, "description": "width"}
    assert properties["mode"]["enum"] == ["a", "b"] and properties["fast"]["type"] == "boolean"
    assert list(schema_properties(Toy, per_dataset=True)) == ["width"]


def test_the_fingerprint_holds_an_option_read_only_under_another_only_then():
    assert trajectory_keys(Toy(out=Path("o"))) == ["width", "mode"]
    assert trajectory_keys(Toy(out=Path("o"), mode="b")) == ["width", "mode", "knob"]


def test_values_from_a_settings_file_are_checked():
    made = from_values(Toy, {"out": "o", "width": 2}, "settings.json")
    assert made.out == Path("o") and made.width == 2
    with pytest.raises(SuperGCNError, match="settings.json sets colour, which Toy does not have"):
        from_values(Toy, {"out": "o", "colour": 1}, "settings.json")
    assert problems(Toy(out=Path("o"), width=0, mode="c")) == ["--width must be at least 1, got 0",
                                                              "--mode must be one of a, b, got 'c'"]


def test_a_job_gets_the_options_its_variant_reads():
    training = {"model": "sage", "epochs": 5, "label_rate": 0.62, "label_draw": "bernoulli", "adaptive_weight": 0.3}
    plain = job_settings(training, Variant("hybrid", 32, False))
    assert plain == {"model": "sage", "epochs": 5, "label_rate": 0.0, "bits": 32}
    labelled = job_settings(training, Variant("hybrid", "adaptive", True))
    assert labelled["label_rate"] == 0.62 and labelled["label_draw"] == "bernoulli"
    assert labelled["adaptive_weight"] == 0.3 and labelled["bits"] == "adaptive"
    assert set(plain) | set(labelled) <= {field.name for field in dataclasses.fields(TrainConfig)}


@dataclass(frozen=True)
class Several:
    """A made-up config with an option taking several values and a boolean that may be unset."""

    kinds: tuple[str, ...] = option(("a", "b"), "kinds", choices=("a", "b", "c"), study=True)
    strict: bool | None = option(None, "strict, or the mode's own", study=True)
    level: int = option(2, "level", values=Range(int, 1), study=True)


@pytest.mark.parametrize("values", [{}, {"kinds": (), "strict": False}, {"kinds": ("c",), "strict": True, "level": 5},
                                    {"strict": None, "level": 1}])
def test_the_command_line_words_of_values_parse_back_to_them(values):
    parser = argparse.ArgumentParser()
    add_arguments(parser, Several)
    parsed = values_given(parser.parse_args(command_line(Several, values)), Several)
    expected = {name: value for name, value in values.items() if value is not None}
    assert {name: tuple(value) if name == "kinds" else value for name, value in parsed.items()} == expected
    assert "kinds (default: a b)" in parser.format_help()
    with pytest.raises(ValueError, match="colour: no option of Several"):
        command_line(Several, {"colour": 1})


def test_several_values_and_an_unset_boolean_as_json_schema():
    properties = schema_properties(Several)
    assert properties["kinds"] == {"type": "array", "uniqueItems": True, "items": {"enum": ["a", "b", "c"]},
                                   "default": ["a", "b"], "description": "kinds"}
    assert properties["strict"]["type"] == ["boolean", "null"] and properties["strict"]["default"] is None
    assert problems(Several(kinds=("a", "d"))) == ["--kinds must be each one of a, b, c, got ('a', 'd')"]
