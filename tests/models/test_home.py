"""Every GNN model has every piece, in its home: adding one is its directory, its test and
its docs row, and nothing else names it."""

import re
import subprocess

import pytest

from supergcn.models import card
from supergcn.models.card import ModelCard
from supergcn.models.layers import layer_module
from supergcn.naming import GNN_MODELS

from conftest import REPO

HOMES = REPO / "supergcn" / "models"


def test_the_models_are_the_homes():
    assert sorted(GNN_MODELS) == sorted(path.parent.name for path in HOMES.glob("*/__init__.py"))


@pytest.mark.parametrize("model", GNN_MODELS)
def test_each_model_has_every_piece(model):
    model_card = card(model)
    assert isinstance(model_card, ModelCard) and model_card.name == model
    layer = layer_module(model)
    assert {"Layer", "pyg_conv", "copy_to_pyg"} <= set(vars(layer))
    assert (REPO / "tests" / "models" / f"test_{model}.py").is_file(), f"{model} has no test of its own"
    rows = [line for line in (REPO / "docs" / "methods.md").read_text().splitlines()
            if line.startswith("|") and f"{{py:mod}}`supergcn.models.{model}`" in line]
    assert len(rows) == 1 and f"`{model}`" in rows[0], f"{model} has no row in docs/methods.md's table of models"


def test_the_options_a_model_reads_are_training_options():
    from supergcn.train.config import TrainConfig

    for model in GNN_MODELS:
        assert set(card(model).training_options) <= set(TrainConfig.__dataclass_fields__)
        assert set(card(model).training_defaults) <= set(TrainConfig.__dataclass_fields__)


def test_an_unknown_model_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="unknown model 'graphormer': choose one of sage"):
        card("graphormer")
    with pytest.raises(ValueError, match="unknown model"):
        layer_module("graphormer")


def test_no_code_outside_the_models_homes_branches_on_a_models_name():
    """A comparison with a model's name as a string (``model == "gat"``, ``in ("sage",``)
    belongs in the model's card; only the models' homes and the tests name them."""
    names = "|".join(GNN_MODELS)
    branching = re.compile(rf"""(==|!=|\bin)\s*\(?["']({names})["']|["']({names})["']\s*(==|!=)""")
    tracked = subprocess.run(["git", "ls-files", "supergcn", "benchmarks", "workflow", "Snakefile"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    found = [f"{name}:{number}" for name in tracked if not name.startswith("supergcn/models/")
             if name.endswith((".py", ".smk")) or name == "Snakefile"
             for number, line in enumerate((REPO / name).read_text().splitlines(), 1) if branching.search(line)]
    assert not found, found
