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

REFUSED = {"separate_constraints": True, "edge_fraction": 0.5}


@pytest.mark.parametrize("limit", ENGINE_LIMITS, ids=lambda limit: f"{limit.engine}-{limit.name}")
def test_the_schema_and_the_engine_refuse_the_same_values(limit, tmp_path):
    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    refused = REFUSED[limit.name]
    config["partition"].update(engine=limit.engine, **{limit.name: refused})
    assert config_problems(config, schema) == [f"partition.{limit.name}: {limit.why}; {limit.fix()}"]
    options = PartitionConfig(engine=limit.engine, **{limit.name: refused})
    (problem,) = engine_problems(options)
    assert problem.startswith(f"{limit.why}: partition.{limit.name} (--{limit.name.replace('_', '-')}) cannot be ")
    with pytest.raises(SuperGCNError, match=re.escape(problem)):
        run_partition(grid_graph(), "h", 2, tmp_path / "p", options.constraints, options.seed, options.edge_fraction,
                      Engine.of(options))
    for allowed in limit.takes:
        config["partition"][limit.name] = allowed
        assert config_problems(config, schema) == []
        assert engine_problems(dataclasses.replace(options, **{limit.name: allowed})) == []


def test_an_engine_is_the_options_it_stands_for():
    options = PartitionConfig(engine="kaminpar", threads=3, kaminpar_preset="fast", kaminpar_large_k_preset="largek",
                              separate_constraints=False)
    engine = Engine.of(options)
    assert engine == Engine("kaminpar", 3, "fast", "largek", False)
    assert len(engine.options()) == len(dataclasses.fields(Engine))
    assert dataclasses.replace(PartitionConfig(), **engine.options()) == options
