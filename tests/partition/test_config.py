"""The partition options declared once (supergcn/partition/config.py): the study schema and
run_partition refuse the same values for an engine, and an Engine is the options it stands for."""

import dataclasses
import re

import pytest
import yaml
from test_metis import grid_graph

from supergcn.errors import SuperGCNError
from supergcn.partition.config import ENGINE_LIMITS, PartitionConfig, engine_problems
from supergcn.partition.store import Engine, run_partition
from supergcn.workflow_config import config_problems, load_schema

from conftest import REPO

REFUSED = {"separate_constraints": True, "edge_fraction": 0.5, "constraints": ("nodes", "train"), "seed": 1}


def as_yaml(value):
    """An option's value as a config file holds it: several values as a list."""
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.parametrize("limit", ENGINE_LIMITS, ids=lambda limit: f"{limit.engine}-{limit.name}")
def test_the_schema_and_the_engine_refuse_the_same_values(limit, tmp_path):
    """Each limit alone: the engine's other limited options hold a value it takes."""
    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    others = {other.name: other.takes[0] for other in ENGINE_LIMITS if other.engine == limit.engine and other != limit}
    refused = REFUSED[limit.name]
    config["partition"].update(engine=limit.engine, **{name: as_yaml(value) for name, value in others.items()},
                               **{limit.name: as_yaml(refused)})
    assert config_problems(config, schema) == [f"partition.{limit.name}: {limit.why}; {limit.fix()}"]
    options = PartitionConfig(engine=limit.engine, **others, **{limit.name: refused})
    (problem,) = engine_problems(options)
    assert problem.startswith(f"{limit.why}: partition.{limit.name} (--{limit.name.replace('_', '-')}) cannot be ")
    with pytest.raises(SuperGCNError, match=re.escape(problem)):
        run_partition(grid_graph(), "h", 2, tmp_path / "p", options.constraints, options.seed, options.edge_fraction,
                      Engine.of(options))
    for allowed in limit.takes:
        config["partition"][limit.name] = as_yaml(allowed)
        assert config_problems(config, schema) == []
        assert engine_problems(dataclasses.replace(options, **{limit.name: allowed})) == []
        # The command line gives several values as a list.
        assert engine_problems(dataclasses.replace(options, **{limit.name: as_yaml(allowed)})) == []


def test_a_fix_names_only_the_engines_that_take_every_value():
    """KaMinPar and RCM both refuse separate constraints, so their fix names METIS alone;
    RCM's seed, which METIS and KaMinPar both take, names both."""
    fixes = {(limit.engine, limit.name): limit.fix() for limit in ENGINE_LIMITS}
    assert fixes["kaminpar", "separate_constraints"] == "set it to false or null, or partition.engine to metis"
    assert fixes["rcm", "separate_constraints"] == "set it to null, or partition.engine to metis"
    assert fixes["rcm", "seed"] == "set it to 0, or partition.engine to metis or kaminpar"
    assert fixes["rcm", "constraints"] == 'set it to ["nodes"] or [], or partition.engine to metis or kaminpar'


def test_an_engine_is_the_options_it_stands_for():
    options = PartitionConfig(engine="kaminpar", threads=3, kaminpar_preset="fast", kaminpar_large_k_preset="largek",
                              separate_constraints=False)
    engine = Engine.of(options)
    assert engine == Engine("kaminpar", 3, "fast", "largek", False)
    assert len(engine.options()) == len(dataclasses.fields(Engine))
    assert dataclasses.replace(PartitionConfig(), **engine.options()) == options
