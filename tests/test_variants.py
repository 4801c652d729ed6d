"""A study's variants (supergcn/variants.py): names that stand for what each trains, the
same names as before the methods' cards (the paths of finished studies), read back exactly,
and the papers' names in tables."""

from dataclasses import fields

import pytest

from supergcn.methods import METHODS, card
from supergcn.methods.bnsgcn import rate_text
from supergcn.methods.distgnn import schedule_delay
from supergcn.methods.distgnn_mb import OPTIONS, MiniBatch
from supergcn.naming import PRECISIONS
from supergcn.train.config import default, job_settings
from supergcn.variants import Variant, display_name

#: Names of every kind, as finished studies' paths hold them, with the entry each comes from.
NAMES = {
    "pre-fp32-nolp": {"strategy": "pre", "bits": 32, "label_propagation": False},
    "hybrid-int2-lp": {"strategy": "hybrid", "bits": 2, "label_propagation": True},
    "pre-fp32-nolp-cd-5": {"strategy": "pre", "bits": 32, "label_propagation": False, "schedule": "cd-5"},
    "pre-fp32-nolp-0c": {"strategy": "pre", "bits": 32, "label_propagation": False, "schedule": "0c"},
    "hybrid-adaptive-lp": {"strategy": "hybrid", "bits": "adaptive", "label_propagation": True},
    "post-fp32-nolp-pipe-g-gcn": {"strategy": "post", "bits": 32, "label_propagation": False, "schedule": "pipe-g",
                                  "model": "gcn"},
    "post-fp32-nolp-bns0.01": {"strategy": "post", "bits": 32, "label_propagation": False, "boundary_rate": 0.01},
    "hybrid-fp32-nolp-bns0-gin": {"strategy": "hybrid", "bits": 32, "label_propagation": False, "boundary_rate": 0.0,
                                  "model": "gin"},
    "post-fp32-nolp-bns0.0000001": {"strategy": "post", "bits": 32, "label_propagation": False,
                                    "boundary_rate": 1e-7},
    "hybrid-fp32-nolp-mop": {"strategy": "hybrid", "bits": 32, "label_propagation": False, "parallelism": "mop"},
    "pre-fp32-lp-gcn-mop": {"strategy": "pre", "bits": 32, "label_propagation": True, "model": "gcn",
                            "parallelism": "mop"},
    "hybrid-fp32-nolp-mb1000": {"strategy": "hybrid", "bits": 32, "label_propagation": False,
                                "minibatch": {"batch_size": 1000}},
    "post-fp32-nolp-mb64-push0": {"strategy": "post", "bits": 32, "label_propagation": False,
                                  "minibatch": {"batch_size": 64, "hec_push": 0}},
    "hybrid-int2-lp-gat-mb7-fan10_all_3-hec5-push0-life0-delay3-flush": {
        "strategy": "hybrid", "bits": 2, "label_propagation": True, "model": "gat",
        "minibatch": {"batch_size": 7, "fanouts": "10,-1,3", "hec_size": 5, "hec_push": 0, "hec_life": 0,
                      "hec_delay": 3, "hec_flush": True}},
    "hybrid-int2-nolp-gat": {"strategy": "hybrid", "bits": 2, "label_propagation": False, "model": "gat"},
}


@pytest.mark.parametrize("name, entry", NAMES.items())
def test_a_variant_is_named_as_before_and_read_back_exactly(name, entry):
    variant = Variant.from_config(entry)
    assert variant.name == name
    assert Variant.parse(name) == variant


def test_variant_names_spell_their_precision():
    for bits, precision in PRECISIONS.items():
        assert Variant("hybrid", bits, True).name == f"hybrid-{precision}-lp"


def test_an_entry_names_the_method_its_keys_select_or_none_at_their_defaults():
    plain = {"strategy": "hybrid", "bits": 32, "label_propagation": False}
    for key, value in (("schedule", "sync"), ("boundary_rate", 1), ("parallelism", "partition")):
        assert Variant.from_config({**plain, key: value}) == Variant.from_config(plain)
    assert Variant.from_config({**plain, "schedule": "cd-5"}).method.name == "distgnn"
    assert Variant.from_config({**plain, "bits": "adaptive"}).method.name == "adaqp"
    assert Variant.from_config(plain).method is None
    # An entry without a model takes the study's.
    assert Variant.from_config({"strategy": "pre", "bits": 32, "label_propagation": False}, "gat").model == "gat"


def test_a_variant_runs_one_compared_method():
    entry = {"strategy": "post", "bits": 32, "label_propagation": False, "schedule": "cd-5", "boundary_rate": 0.1}
    with pytest.raises(ValueError, match=r"runs one compared method, not DistGNN \(schedule: cd-5\) and BNS-GCN"):
        Variant.from_config(entry)
    for two in ("post-fp32-nolp-bns0.1-mop", "pre-fp32-nolp-cd-5-mb64", "hybrid-fp32-nolp-pipe-gat-mop"):
        with pytest.raises(ValueError, match="is not a variant name"):
            Variant.parse(two)


def test_names_keep_their_order_and_one_spelling():
    with pytest.raises(ValueError, match="hybrid-fp32-nolp-mop"):
        Variant.parse("hybrid-fp32-nolp-mop-gcn")  # the parallelism comes after the model
    with pytest.raises(ValueError, match="is variant hybrid-fp32-nolp-mb64 spelled otherwise"):
        Variant.parse("hybrid-fp32-nolp-mb64-push2000")
    for wrong in ("hybrid-fp32-nolp-mb0", "hybrid-fp32-nolp-mb64-flush-push0", "hybrid-fp32-nolp-mb64-mop",
                  "pre-fp32-nolp-cd-05"):
        with pytest.raises(ValueError, match="is not a variant name"):
            Variant.parse(wrong)


def test_settings_given_at_their_defaults_name_the_same_variant():
    entry = {"strategy": "hybrid", "bits": 32, "label_propagation": False, "minibatch": {"batch_size": 1000}}
    spelled_out = {**entry, "minibatch": {"batch_size": 1000, "fanouts": "5,10,15", "hec_push": 2000}}
    assert Variant.from_config(spelled_out) == Variant.from_config(entry)


def test_a_minibatch_variant_holds_exactly_distgnn_mbs_options_with_their_defaults():
    names = [name for name, _, _ in OPTIONS]
    assert [field.name for field in fields(MiniBatch)] == names
    assert {name: getattr(MiniBatch(1), name) for name in names[1:]} == {name: default(name) for name in names[1:]}


def test_the_papers_configurations_have_the_papers_names():
    assert display_name("pre-fp32-nolp-cd-5") == "DistGNN (cd-5)"
    assert display_name("pre-fp32-nolp-0c") == "DistGNN (0c)"
    assert display_name("hybrid-int2-lp") == "SuperGCN w/ comm optimizations"
    assert display_name("post-fp32-nolp") == "SuperGCN w/o comm optimizations"
    assert display_name("post-fp32-nolp-pipe") == "PipeGCN"
    assert display_name("post-fp32-nolp-pipe-fg") == "PipeGCN-GF"
    assert display_name("post-fp32-nolp-bns0.1") == "BNS-GCN (p = 0.1)"
    assert display_name("hybrid-fp32-nolp-mop") == "MixGCN"
    assert display_name("post-fp32-nolp-mop") == "MixGCN"  # it reads the plan's rows, not how it serves cut edges
    assert display_name("hybrid-fp32-nolp-mb1000") == "DistGNN-MB"
    assert display_name("post-fp32-nolp-mb32") == "DistGNN-MB"  # it samples its part, whatever the plan
    assert display_name("hybrid-fp32-nolp-mb32-push0") == "DistGNN-MB (push0)"
    assert display_name("hybrid-fp32-nolp-gat-mb32-flush") == "DistGNN-MB (gat, flush)"
    assert display_name("hybrid-adaptive-lp") == "AdaQP w/ LP"
    assert display_name("post-adaptive-nolp") == "AdaQP"


@pytest.mark.parametrize("other", [
    "hybrid-fp32-nolp-cd-5", "pre-int2-nolp-cd-5", "hybrid-fp32-nolp-bns0.1", "post-fp32-lp-pipe",
    "post-fp32-nolp-pipe-gcn", "hybrid-int2-nolp-mop", "hybrid-fp32-lp-mop", "hybrid-fp32-nolp-gcn-mop",
    "hybrid-int2-nolp-mb32", "hybrid-fp32-lp-mb32", "hybrid-adaptive-lp-gcn", "hybrid-fp32-nolp"])
def test_a_variant_is_named_for_its_method_only_as_published(other):
    assert display_name(other) == other


def test_names_and_their_parts_round_trip():
    assert [rate_text(rate) for rate in (0.1, 0.01, 0.0, 0.25, 1e-7)] == ["0.1", "0.01", "0", "0.25", "0.0000001"]
    assert schedule_delay("cd-5") == 5 and schedule_delay("0c") is None and schedule_delay("cd-0") == 0
    with pytest.raises(ValueError, match="cd-<r>"):
        schedule_delay("cd5")


def test_every_method_with_a_key_names_its_variants_and_reads_them_back():
    """The cards' naming, each method's round trip: a method added with a key of its own is
    named by it without touching this module."""
    samples = {"schedule": ["cd-3", "pipe-f"], "boundary_rate": [0.5], "parallelism": ["mop"],
               "minibatch": [{"batch_size": 16, "hec_life": 4}]}
    named = [card(name) for name in METHODS if card(name).naming.key is not None]
    for method in named:  # a key without samples here: its card's example value
        given = samples.get(method.naming.key, [method.example.get(method.option)])
        values = [v for v in given if method.selects(method.naming.options_of(
            method.naming.value(v)))]
        assert values, f"no sample value selects {method.name}"
        for value in values:
            variant = Variant.from_config({"strategy": "hybrid", "bits": 32, "label_propagation": False,
                                           method.naming.key: value})
            assert variant.method is method and Variant.parse(variant.name) == variant


def test_only_a_minibatch_variants_jobs_read_the_minibatch_options():
    names = [name for name, _, _ in OPTIONS]
    training = {"model": "sage", "num_layers": 3, "epochs": 5}
    full = job_settings(training, Variant("hybrid", 32, False))
    assert not set(full) & set(names)
    settings = job_settings(training, Variant.from_config({"strategy": "hybrid", "bits": 32, "label_propagation": False,
                                                           "minibatch": {"batch_size": 64, "hec_push": 0}}))
    assert {name: settings[name] for name in names} == {
        "batch_size": 64, "fanouts": "5,10,15", "hec_size": 1_000_000, "hec_push": 0, "hec_life": 2, "hec_delay": 1,
        "hec_flush": False}
    assert {name: value for name, value in settings.items() if name not in names} == full
