"""One definition of each shared name: the config schema's enums and patterns, the config's
training values and the command line agree with the Python definitions."""

import re

import pytest
import yaml

from supergcn import naming
from supergcn.train.config import UPSTREAM_LABEL_RATE, TrainConfig, default
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
    naming.Variant("pre", 32, True, model="gcn", parallelism="mop")])
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
