"""GIN's card, by hand, and its own learning rate (its layer is held to PyG's GINConv in
tests/train/test_models.py)."""

from supergcn.cli import build_parser
from supergcn.cli.train import config_of
from supergcn.models import card
from supergcn.train.config import default, job_settings, with_model_defaults
from supergcn.variants import Variant

GIN = card("gin")
PATHS = ["--graph", "g", "--partition", "p", "--plan", "q", "--out", "o"]


def test_its_width_rule_is_sages():
    assert GIN.layer_transforms_first(16, 8) and not GIN.layer_transforms_first(8, 8)


def test_it_trains_at_its_own_learning_rate_unless_one_is_given():
    assert GIN.training_defaults == {"lr": 0.001} and default("lr") == 0.01
    assert with_model_defaults({"model": "gin", "lr": 0.01}, given=())["lr"] == 0.001
    assert with_model_defaults({"model": "gin", "lr": 0.01}, given={"lr"})["lr"] == 0.01
    assert with_model_defaults({"model": "sage", "lr": 0.01}, given=())["lr"] == 0.01


def test_the_command_line_and_a_study_use_it():
    parse = build_parser(["train"]).parse_args
    assert config_of(parse(["train", *PATHS, "--model", "gin"])).lr == 0.001
    assert config_of(parse(["train", *PATHS, "--model", "gin", "--lr", "0.01"])).lr == 0.01
    assert config_of(parse(["train", *PATHS])).lr == 0.01
    training = {"model": "gin", "lr": 0.01, "epochs": 5}
    assert job_settings(training, Variant("hybrid", 32, False))["lr"] == 0.001
    assert job_settings(training, Variant("hybrid", 32, False), given={"lr"})["lr"] == 0.01


def test_the_learning_rates_help_names_it():
    from supergcn.train.config import TrainConfig

    assert "GIN 0.001" in TrainConfig.__dataclass_fields__["lr"].metadata["option"]["help"]
