"""Every compared method has every piece, in its room: adding one is its room (module and
card), its test and its docs row, and nothing outside the room names it. What a card says
a method cannot run with is refused with its fix, whatever the method."""

import importlib
import itertools
import re
import subprocess

import pytest

from supergcn.methods import METHODS, card, method_cards, method_of, selected_methods
from supergcn.methods.card import MODEL_NEEDS, PRECOMPUTE_RULES, MethodCard
from supergcn.models import card as model_card
from supergcn.naming import GNN_MODELS, ROUNDINGS, STRATEGIES
from supergcn.train.config import TrainConfig, default
from supergcn.variants import Variant, display_name

from conftest import REPO

ROOMS = REPO / "supergcn" / "methods"
PATHS = {name: "x" for name in ("graph", "partition", "plan", "out")}


def test_the_methods_are_the_rooms():
    assert list(METHODS) == sorted(path.parent.name for path in ROOMS.glob("*/__init__.py"))
    assert [method.name for method in method_cards()] == list(METHODS)


@pytest.mark.parametrize("name", METHODS)
def test_each_method_has_every_piece(name):
    method = card(name)
    assert isinstance(method, MethodCard) and method.name == name and method.title
    fields = TrainConfig.__dataclass_fields__
    assert method.option in fields, "its selecting option is a training option"
    for option, _, _ in method.options:
        assert fields[option].metadata["option"]["group"] == name, f"{option} is in its method's group"
    # Its example selects it and nothing else; a run at the defaults is no method.
    assert selected_methods({**{k: default(k) for k in fields}, **method.example}) == [method]
    assert method.example[method.option] != default(method.option)
    assert method.run_name({**{k: default(k) for k in fields}, **method.example, "strategy": method.strategies[0],
                            "label_propagation": False})
    assert method.model_needs is None or method.model_needs in MODEL_NEEDS
    assert method.precompute in PRECOMPUTE_RULES and set(method.strategies) <= set(STRATEGIES)
    assert all(method.plans_for(model_card(model)) and set(method.plans_for(model_card(model))) <= set(STRATEGIES)
               for model in GNN_MODELS)
    # Its per-rank code is a module of its room, built through the card.
    runtime = [path.stem for path in (ROOMS / name).glob("*.py") if path.stem != "__init__"]
    assert runtime and all(importlib.import_module(f"supergcn.methods.{name}.{stem}") for stem in runtime)
    assert (REPO / "tests" / "methods" / f"test_{name}.py").is_file(), f"{name} has no test of its own"
    rows = [line for line in (REPO / "docs" / "methods.md").read_text().splitlines()
            if line.startswith("|") and f"{{py:mod}}`supergcn.methods.{name}`" in line]
    assert len(rows) == 1, f"{name} has no row in docs/methods.md's table of methods"


@pytest.mark.parametrize("name", METHODS)
def test_rounding_auto_rounds_as_the_method_was_published_and_supergcn_as_upstream(name):
    method = card(name)
    assert method.rounding in ROUNDINGS
    assert settings(method).quantization_rounding == method.rounding
    for rounding in ROUNDINGS:
        assert settings(method, rounding=rounding).quantization_rounding == rounding
    assert TrainConfig(**PATHS, bits=2).quantization_rounding == "nearest"


def test_no_method_is_a_run_at_the_defaults():
    assert method_of({name: default(name) for name in TrainConfig.__dataclass_fields__}) is None


@pytest.mark.parametrize("name", METHODS)
def test_a_variant_of_each_method_names_it_and_its_paper_names_it_as_published(name):
    method = card(name)
    strategy = method.strategies[-1]
    entry = {"strategy": strategy, "bits": method.bits[0], "label_propagation": False}
    if method.naming.key is not None:
        value = method.example[method.option]
        entry[method.naming.key] = {method.option: value} if method.naming.group else value
    else:
        entry.update(method.example)
    variant = Variant.from_config(entry)
    assert variant.method is method and Variant.parse(variant.name) == variant
    values = variant.values()
    assert display_name(variant.name) == (method.run_name(values) if method.published(values) else variant.name)


def settings(method: MethodCard, **changes) -> TrainConfig:
    return TrainConfig(**PATHS, **{"bits": method.bits[0], **method.example, **changes})


@pytest.mark.parametrize("name", METHODS)
def test_what_a_card_says_its_method_cannot_run_with_is_refused_with_its_fix(name):
    method = card(name)
    off = "--" + method.option.replace("_", "-")
    assert settings(method).conflicts() == [], "its example runs"
    if method.option != "bits":  # a method selected by its bits is off at others
        other_bits = next(bits for bits in (32, 2) if bits not in method.bits)
        found = settings(method, bits=other_bits).conflicts()
        assert any(f"--bits {method.bits[0]}" in m and off in m for m in found), found
    if method.model_needs is not None:
        lacking = next(m for m in GNN_MODELS if not getattr(model_card(m), method.model_needs))
        having = [m for m in GNN_MODELS if getattr(model_card(m), method.model_needs)]
        found = settings(method, model=lacking).conflicts()
        assert any(f"--model {' or '.join(having)}" in m and off in m for m in found), found
    if method.plain_input:
        found = settings(method, label_rate=0.5).conflicts()
        assert any("--label-rate 0" in m and off in m for m in found), found
    if method.precompute == "refused":
        found = settings(method, precompute_input="on").conflicts()
        assert any("--precompute-input off" in m and off in m for m in found), found
    for precision in {"fp32", "bf16"} - set(method.precisions):
        found = settings(method, precision=precision).conflicts()
        assert any(f"--precision {method.precisions[0]}" in m and off in m for m in found), found
    for ignored in method.ignores:
        flag = "--" + ignored.replace("_", "-")
        found = settings(method, **{ignored: not default(ignored)}).conflicts()
        assert any(m.startswith(f"{flag} ") and "is not read by this run" in m for m in found), found


@pytest.mark.parametrize("first, second", [
    (a, b) for a, b in itertools.combinations(METHODS, 2) if card(a).option != card(b).option])
def test_a_run_is_one_method(first, second):
    one, other = card(first), card(second)
    found = TrainConfig(**PATHS, **one.example, **other.example).conflicts()
    (message,) = [m for m in found if m.startswith("a run is SuperGCN's exchange or one compared method")]
    for method in (one, other):
        assert f"--{method.option.replace('_', '-')} {default(method.option)}" in message or (
            default(method.option) is True), message


def tracked(*paths: str) -> list[str]:
    return subprocess.run(["git", "ls-files", *paths], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.split()


def test_nothing_outside_the_rooms_imports_or_names_a_method():
    """Outside ``supergcn/methods/``, the package imports the registry alone (no room), tests
    no method's class and compares nothing with a method's name or a value only a method
    takes (``adaptive``, ``mop``): the cards say what a method is."""
    words = set(METHODS) | {word for method in method_cards() for words, _ in method.values.values()
                            if isinstance(words, tuple) for word in words}
    words |= {choice for method in method_cards() for _, _, field in method.options
              for choice in (field.metadata["option"]["choices"] or ()) if choice != field.default}
    names = "|".join(sorted(words))
    branching = re.compile(rf"""(==|!=|\bin)\s*\(?["']({names})["']|["']({names})["']\s*(==|!=)""")
    # The registry's builder (supergcn.methods.runtime) is the trainer's one way to a room.
    importing = re.compile(r"\bsupergcn\.methods\.(?!runtime\b)\w+")
    classes = "|".join(name for method in METHODS
                        for name in re.findall(r"^class (\w+)", "".join(
                            path.read_text() for path in (ROOMS / method).glob("*.py")), re.M))
    instance = re.compile(rf"isinstance\([^)]*\b({classes})\b")
    found = []
    for name in tracked("supergcn", "workflow", "Snakefile"):
        if name.startswith("supergcn/methods/") or not (name.endswith((".py", ".smk")) or name == "Snakefile"):
            continue
        for number, line in enumerate((REPO / name).read_text().splitlines(), 1):
            code = line.split("#")[0]
            if branching.search(code) or instance.search(code) or (
                    importing.search(code) and re.search(r"^\s*(from|import)\b", code)):
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, found


def test_the_options_only_a_method_reads_are_read_only_in_its_runs():
    from supergcn.train.config import option_read

    for method in method_cards():
        base = {name: default(name) for name in TrainConfig.__dataclass_fields__}
        for option in method.option_names:
            if option == method.option:
                continue
            assert not option_read(option, base), f"{option} is read where {method.title} is off"
            assert option_read(option, {**base, **method.example}) or option == "pipe_momentum", option
