"""One definition of each shared name: the config schema's enums and patterns, the config's
training values and the command line agree with the Python definitions."""

import re
from dataclasses import fields

import pytest
import yaml

from supergcn import naming
from supergcn.options import declared
from supergcn.train.config import UPSTREAM_LABEL_RATE, TrainConfig, default, job_settings
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
    (("variants", "[]", "bits"), naming.BIT_CHOICES),
    (("variants", "[]", "model"), naming.GNN_MODELS),
    (("variants", "[]", "parallelism"), naming.PARALLELISMS),
    (("training", "model"), naming.GNN_MODELS),
    (("self_loops",), naming.SELF_LOOPS),
    (("training", "rounding"), naming.ROUNDINGS),
    (("training", "label_draw"), naming.LABEL_DRAWS),
    (("training", "parameter_dtype"), tuple(naming.PARAMETER_DTYPES)),
    (("perf", "bits", "[]"), naming.QUANTIZED_BITS),
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


def test_variant_names_round_trip_their_precision():
    for bits, name in naming.PRECISIONS.items():
        assert naming.precision_bits(naming.precision_name(bits)) == bits
        assert naming.Variant("hybrid", bits, True).name == f"hybrid-{name}-lp"
    assert naming.Variant("pre", 32, False).name == "pre-fp32-nolp"


def test_the_schedule_pattern_of_the_schema_is_the_python_one():
    assert schema_at("variants", "[]", "schedule")["pattern"] == f"^({naming.SCHEDULE_PATTERN})$"


@pytest.mark.parametrize("variant", [
    naming.Variant("pre", 32, False, "cd-5"), naming.Variant("hybrid", "adaptive", True),
    naming.Variant("post", 4, False, "0c"), naming.Variant("pre", 2, True, "cd-0"),
    naming.Variant("hybrid", 2, False, model="gat"), naming.Variant("post", 32, True, "cd-1", "gcn"),
    naming.Variant("post", 32, False, "pipe-g", "gcn"), naming.Variant("post", 32, False, "pipe"),
    naming.Variant("post", 32, False, boundary_rate=0.01), naming.Variant("hybrid", 32, False, model="gin",
                                                                          boundary_rate=0.0),
    naming.Variant("post", 32, False, boundary_rate=1e-7), naming.Variant("hybrid", 32, False, parallelism="mop"),
    naming.Variant("pre", 32, True, model="gcn", parallelism="mop"),
    naming.Variant("hybrid", 32, False, minibatch=naming.MiniBatch(1000)),
    naming.Variant("post", 32, False, minibatch=naming.MiniBatch(64, hec_push=0)),
    naming.Variant("hybrid", 2, True, "cd-5", "gcn", 0.1, "mop", naming.MiniBatch(7, "10,-1,3", 5, 0, 0, 3, True))])
def test_variants_round_trip_their_names(variant):
    assert naming.Variant.parse(variant.name) == variant


def test_the_mixture_of_parallelism_is_named_mixgcn_as_published_only():
    mixgcn = naming.Variant.from_config({"strategy": "hybrid", "bits": 32, "label_propagation": False,
                                         "parallelism": "mop"})
    assert mixgcn.name == "hybrid-fp32-nolp-mop" and naming.display_name(mixgcn.name) == "MixGCN"
    # Any strategy: the mixture reads the plan's rows, not how it serves cut edges.
    assert naming.display_name("post-fp32-nolp-mop") == "MixGCN"
    for other in ("hybrid-int2-nolp-mop", "hybrid-fp32-lp-mop", "hybrid-fp32-nolp-gcn-mop", "hybrid-fp32-nolp"):
        assert naming.display_name(other) == other
    assert naming.Variant.parse("hybrid-fp32-nolp").parallelism == "partition"
    with pytest.raises(ValueError, match="hybrid-fp32-nolp-mop"):
        naming.Variant.parse("hybrid-fp32-nolp-mop-gcn")  # the parallelism comes last


def minibatch_options() -> list[str]:
    """TrainConfig's options of the command line's mini-batch group, in declaration order."""
    return [field.name for field, spec in declared(TrainConfig) if spec["group"] == "minibatch"]


def test_a_minibatch_variant_holds_exactly_trains_minibatch_options_with_their_defaults():
    names = minibatch_options()
    assert [field.name for field in fields(naming.MiniBatch)] == names
    assert list(schema_at("variants", "[]", "minibatch")["properties"]) == names
    assert {name: getattr(naming.MiniBatch(1), name) for name in names[1:]} == {name: default(name)
                                                                               for name in names[1:]}


def test_a_minibatch_variant_is_named_for_its_batch_and_the_settings_off_their_defaults():
    entry = {"strategy": "hybrid", "bits": 32, "label_propagation": False, "minibatch": {"batch_size": 1000}}
    plain = naming.Variant.from_config(entry)
    assert plain.name == "hybrid-fp32-nolp-mb1000" and naming.display_name(plain.name) == "DistGNN-MB"
    # Settings given at their defaults name the same variant.
    spelled_out = {**entry, "minibatch": {"batch_size": 1000, "fanouts": "5,10,15", "hec_push": 2000}}
    assert naming.Variant.from_config(spelled_out) == plain
    changed = naming.Variant.from_config({**entry, "minibatch": {"batch_size": 64, "fanouts": "10,-1,5",
                                                                 "hec_size": 500, "hec_push": 0, "hec_life": 4,
                                                                 "hec_delay": 2, "hec_flush": True}})
    assert changed.name == "hybrid-fp32-nolp-mb64-fan10_all_5-hec500-push0-life4-delay2-flush"
    assert naming.display_name("hybrid-fp32-nolp-mb32-push0") == "DistGNN-MB (push0)"
    assert naming.display_name("post-fp32-nolp-mb32") == "DistGNN-MB"  # it samples its part, whatever the plan
    assert naming.display_name("hybrid-fp32-nolp-gat-mb32-flush") == "DistGNN-MB (gat, flush)"
    for other in ("hybrid-int2-nolp-mb32", "hybrid-fp32-lp-mb32", "hybrid-fp32-nolp-mop-mb32",
                  "hybrid-fp32-nolp-bns0.1-mb32", "pre-fp32-nolp-cd-5-mb32"):
        assert naming.display_name(other) == other
    assert naming.Variant.parse("hybrid-fp32-nolp").minibatch is None
    with pytest.raises(ValueError, match="is variant hybrid-fp32-nolp-mb64 spelled otherwise"):
        naming.Variant.parse("hybrid-fp32-nolp-mb64-push2000")
    for wrong in ("hybrid-fp32-nolp-mb0", "hybrid-fp32-nolp-mb64-flush-push0", "hybrid-fp32-nolp-mb64-mop"):
        with pytest.raises(ValueError, match="is not a variant name"):
            naming.Variant.parse(wrong)


def test_only_a_minibatch_variants_jobs_read_the_minibatch_options():
    training = {"model": "sage", "num_layers": 3, "epochs": 5}
    full = job_settings(training, naming.Variant("hybrid", 32, False))
    assert not set(full) & set(minibatch_options())
    settings = job_settings(training, naming.Variant("hybrid", 32, False, minibatch=naming.MiniBatch(64, hec_push=0)))
    assert {name: settings[name] for name in minibatch_options()} == {
        "batch_size": 64, "fanouts": "5,10,15", "hec_size": 1_000_000, "hec_push": 0, "hec_life": 2, "hec_delay": 1,
        "hec_flush": False}
    assert {name: value for name, value in settings.items() if name not in minibatch_options()} == full


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


def test_a_variant_names_its_model_unless_graphsage():
    assert naming.Variant("hybrid", 2, False, model="gin").name == "hybrid-int2-nolp-gin"
    assert naming.Variant("hybrid", 2, False, model="sage").name == "hybrid-int2-nolp"
    # An entry without a model takes the study's.
    assert naming.Variant.from_config({"strategy": "pre", "bits": 32, "label_propagation": False}, "gat").model == "gat"


def test_distgnn_and_the_paper_configurations_have_the_paper_names():
    assert naming.display_name("pre-fp32-nolp-cd-5") == "DistGNN (cd-5)"
    assert naming.display_name("pre-fp32-nolp-0c") == "DistGNN (0c)"
    assert naming.display_name("hybrid-int2-lp") == "SuperGCN w/ comm optimizations"
    assert naming.display_name("hybrid-int2-lp-cd-5") == "hybrid-int2-lp-cd-5"
    with pytest.raises(ValueError, match="cd-<r>"):
        naming.schedule_delay("cd5")


def test_pipegcn_and_bnsgcn_have_their_papers_names():
    assert naming.display_name("post-fp32-nolp-pipe") == "PipeGCN"
    assert naming.display_name("post-fp32-nolp-pipe-fg") == "PipeGCN-GF"
    assert naming.display_name("post-fp32-nolp-bns0.1") == "BNS-GCN (p = 0.1)"
    # Only as published: float32 post rows, GraphSAGE, no label inputs.
    for other in ("hybrid-fp32-nolp-bns0.1", "post-fp32-lp-pipe", "post-fp32-nolp-pipe-gcn"):
        assert naming.display_name(other) == other
    assert naming.Variant.from_config({"strategy": "post", "bits": 32, "label_propagation": False,
                                       "boundary_rate": 0.1}).name == "post-fp32-nolp-bns0.1"
    assert [naming.rate_text(rate) for rate in (0.1, 0.01, 0.0, 0.25, 1e-7)] == [
        "0.1", "0.01", "0", "0.25", "0.0000001"]


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
