"""One definition of each shared name: the config schema's enums and patterns, the config's
training values and the command line agree with the Python definitions."""

import re

import pytest
import yaml

from supergcn import naming
from supergcn.methods.mixgcn import PARALLELISMS
from supergcn.train.config import (
    BIT_CHOICES,
    ROUNDING_CHOICES,
    SCHEDULE_PATTERN,
    UPSTREAM_LABEL_RATE,
    TrainConfig,
    default,
)
from supergcn.workflow_config import config_problems, load_schema

from conftest import REPO

SCHEMA = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def schema_at(*path):
    node = SCHEMA
    for key in path:
        node = node["properties"][key] if key != "[]" else node["items"]
    return node


@pytest.mark.parametrize("path, python", [
    (("partition", "constraints", "[]"), naming.PARTITION_CONSTRAINTS),
    (("partition", "engine"), naming.PARTITION_ENGINES),
    (("variants", "[]", "strategy"), naming.STRATEGIES),
    (("variants", "[]", "bits"), BIT_CHOICES),
    (("variants", "[]", "model"), naming.GNN_MODELS),
    (("variants", "[]", "parallelism"), PARALLELISMS),
    (("training", "model"), naming.GNN_MODELS),
    (("self_loops",), naming.SELF_LOOPS),
    (("training", "rounding"), ROUNDING_CHOICES),
    (("training", "label_draw"), naming.LABEL_DRAWS),
    (("training", "parameter_dtype"), tuple(naming.PARAMETER_DTYPES)),
    (("perf", "bits", "[]"), naming.NARROWER_BITS),
    (("perf", "models", "[]"), naming.GNN_MODELS),
    (("perf", "local", "bits", "[]"), tuple(naming.PRECISIONS)),
])
def test_schema_enums_equal_the_python_definitions(path, python):
    assert sorted(schema_at(*path)["enum"], key=str) == sorted(python, key=str)


def test_schema_dataset_pattern_accepts_exactly_the_registered_datasets():
    from supergcn.data.datasets import REAL_DATASETS, RMAT_PATTERN, synthetic

    pattern = SCHEMA["$defs"]["builtin_dataset"]["pattern"]
    alternatives = re.fullmatch(r"\^\((.*)\)\$", pattern).group(1).split("|")
    assert alternatives == [*REAL_DATASETS, *synthetic.PLANTED_PRESETS, RMAT_PATTERN]  # the registry's order


def test_the_default_config_trains_with_the_python_defaults():
    """config/config.yaml departs from TrainConfig's defaults only where the study means to:
    fewer epochs (a laptop run), checkpoints, and the paper's rate for the LP variants."""
    chosen = {"epochs", "checkpoint_every", "label_rate"}
    for key, value in CONFIG["training"].items():
        if key not in chosen:
            assert value == default(key), key
    assert CONFIG["training"]["label_rate"] == UPSTREAM_LABEL_RATE


def test_the_train_command_takes_its_defaults_from_train_config():
    from supergcn.cli import build_parser
    from supergcn.cli.train import config_of

    args = build_parser(["train"]).parse_args(["train", "--graph", "g", "--partition", "p", "--plan", "q",
                                                "--out", "o"])
    parsed = config_of(args)
    for field in TrainConfig.__dataclass_fields__:
        if field not in ("graph", "partition", "plan", "out"):
            assert getattr(parsed, field) == default(field), field


def test_the_schedule_pattern_of_the_schema_is_the_python_one():
    assert schema_at("variants", "[]", "schedule")["pattern"] == f"^({SCHEDULE_PATTERN})$"


def cli_takes(option: str, value) -> bool:
    """Whether ``supergcn train --option value`` parses."""
    from supergcn.cli import build_parser

    words = ["train", "--graph", "g", "--partition", "p", "--plan", "q", "--out", "o",
             f"--{option.replace('_', '-')}={value}"]
    try:
        build_parser(["train"]).parse_args(words)
    except SystemExit:
        return False
    return True


@pytest.mark.parametrize("option, value", [
    ("batch_size", 1), ("fanouts", "5,10,15"), ("fanouts", "-1,3"), ("fanouts", "5,0,15"), ("fanouts", "5,-2"),
    ("fanouts", "five"), ("fanouts", ""), ("hec_size", 0), ("hec_size", 1), ("hec_push", -1), ("hec_push", 0),
    ("hec_life", -1), ("hec_life", 0), ("hec_delay", 0), ("hec_delay", 1)])
def test_the_schema_takes_a_minibatch_setting_where_the_command_line_does(option, value):
    config = {**CONFIG, "variants": [{"strategy": "hybrid", "bits": 32, "label_propagation": False,
                                      "minibatch": {"batch_size": 64, option: value}}]}
    problems = config_problems(config, SCHEMA)
    assert (problems == []) == cli_takes(option, value), problems
    assert all(line.startswith(f"variants.0.minibatch.{option}: ") for line in problems)


@pytest.mark.parametrize("minibatch, problem", [
    ({"batch_size": 0}, "variants.0.minibatch.batch_size: 0 is less than the minimum of 1"),
    ({}, "variants.0.minibatch: 'batch_size' is a required property"),
    ({"batch_size": 64, "fanouts": "5, 10"}, "variants.0.minibatch.fanouts: \"5, 10\" is not fan-outs such as"),
    ({"batch_size": 64, "hec_flush": "yes"}, "variants.0.minibatch.hec_flush: 'yes' is not of type 'boolean'"),
    ({"batch_size": 64, "hec_pushes": 0}, "variants.0.minibatch.hec_pushes: unknown key (did you mean "
                                          "variants.0.minibatch.hec_push?)")])
def test_the_schema_refuses_a_minibatch_variant_without_a_batch_or_with_a_setting_it_cannot_take(minibatch, problem):
    """A batch of 0 would train full batches; fan-outs are spelled as the variant's name reads them back."""
    config = {**CONFIG, "variants": [{"strategy": "hybrid", "bits": 32, "label_propagation": False,
                                      "minibatch": minibatch}]}
    (line,) = config_problems(config, SCHEMA)
    assert line.startswith(problem), line


@pytest.mark.parametrize("parallelism, refused", [("mop", False), ("partition", False), ("mixed", True)])
def test_the_schema_takes_a_variants_parallelism(parallelism, refused):
    config = {**CONFIG, "variants": [{"strategy": "hybrid", "bits": 32, "label_propagation": False,
                                      "parallelism": parallelism}]}
    problems = config_problems(config, SCHEMA)
    if not refused:
        assert problems == []
    else:
        (line,) = problems
        assert line.startswith("variants.0.parallelism: 'mixed' is not one of"), line


def test_renamed_keys_are_named_with_their_new_name():
    assert naming.renamed_key_errors({"perf": {}}) == []
    (message,) = naming.renamed_key_errors({"model": {}})
    assert "`model:`" in message and "`perf:`" in message


def test_schema_machine_entries_are_exactly_the_profile_entries():
    from supergcn.bench.comm import ROUNDS
    from supergcn.perf.prediction import PROFILE_FIELDS, PROFILE_KEYS

    entry = SCHEMA["properties"]["machines"]["additionalProperties"]
    assert set(entry["properties"]) - {"description", "sources", "by_num_ranks"} == set(PROFILE_FIELDS)
    assert set(entry["required"]) == {*PROFILE_KEYS, "sources"}
    assert set(entry["properties"]["by_num_ranks"]["additionalProperties"]["properties"]) == set(PROFILE_FIELDS)
    assert schema_at("perf", "local", "rounds")["default"] == CONFIG["perf"]["local"]["rounds"] == ROUNDS


def test_the_default_config_partitions_with_the_python_defaults():
    from supergcn.partition.config import default

    for key, value in CONFIG["partition"].items():
        assert value == (list(default(key)) if key == "constraints" else default(key)), key


def test_the_partition_command_takes_its_defaults_from_partition_config():
    from supergcn.cli import build_parser
    from supergcn.options import values_given
    from supergcn.partition.config import PartitionConfig
    from supergcn.partition.store import Engine

    args = build_parser(["partition"]).parse_args(["partition", "--graph", "g", "--parts", "2", "--out", "o"])
    assert PartitionConfig(**values_given(args, PartitionConfig)) == PartitionConfig()
    assert Engine.of(PartitionConfig()) == Engine()
