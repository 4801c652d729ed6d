# Paths, wildcards and helpers shared by the rules. The Snakefile imports only the
# light modules supergcn.naming, supergcn.sources, supergcn.train.config and
# supergcn.workflow_config, so parsing the workflow pays for no scientific library.
import json
import math
import os
import shlex

from supergcn.naming import ADAPTIVE, PRECISIONS, STRATEGIES, SYNCHRONOUS, VARIANT_PATTERN, Variant, precision_bits
from supergcn.sources import command_hash
from supergcn.train.config import TrainConfig, adaptive_fields
from supergcn.workflow_config import ConfigError

DATA = config["data_root"]
RESULTS = config["results_root"]
CHECKPOINTS = config["checkpoint_root"]
EXECUTION = config["execution"]
TRAINING = config["training"]
PERF = config["perf"]
PERF_TABLES = ["perf_hybrid", "perf_predictions", "perf_regime", "perf_crossover", "perf_cost", "perf_validation"]
PERF_FIGURES = ["perf_comm_scaling", "perf_cost"]


wildcard_constraints:
    dataset=r"[A-Za-z0-9_\-]+",
    P=r"\d+",
    strategy="|".join(STRATEGIES),
    precision="|".join(PRECISIONS.values()),
    variant=VARIANT_PATTERN,
    seed=r"\d+",
    machine=r"[A-Za-z0-9_\-]+",


def code(command):
    """A hash of the package sources `supergcn <command>` imports (supergcn/sources.py).

    Snakemake sees edits of a job's own code, not of the package its shell calls; with this
    hash among its parameters, editing any module the command can run reruns the job.
    """
    return command_hash(command)


def variants():
    """The study's variants; one that cannot run with the training options is an error now."""
    chosen = [Variant.from_config(entry) for entry in config["variants"]]
    problems = [
        f"variant {variant.name}: {problem}"
        for variant in chosen
        for problem in TrainConfig(
            graph="", partition="", plan="", out="", model=TRAINING["model"], bits=variant.bits,
            schedule=variant.schedule
        ).conflicts()
    ]
    if problems:
        raise ConfigError("; ".join(problems) + " (in the config's variants list)")
    return chosen


def variant_names():
    return [variant.name for variant in variants()]


def run_files(dataset):
    return expand(
        f"{RESULTS}/runs/{dataset}/P{{P}}/{{variant}}/seed{{seed}}.jsonl",
        P=config["process_counts"],
        variant=variant_names(),
        seed=config["seeds"],
    )


def all_run_files():
    return [path for dataset in config["datasets"] for path in run_files(dataset)]


def volume_plans():
    """DATASET=PLAN_DIR for the hybrid plan at every P (its manifest also holds pre/post)."""
    return [
        (dataset, f"{DATA}/plans/{dataset}/P{P}/hybrid")
        for dataset in config["datasets"]
        for P in config["process_counts"]
    ]


def speedup_baseline_flag():
    baseline = config.get("speedup_baseline")
    if baseline is None:
        return ""
    if baseline not in variant_names():
        raise ConfigError(
            f"speedup_baseline {baseline!r} is not a variant of this study ({', '.join(variant_names())})",
            "name one of them or remove the key",
        )
    return f"--baseline {shlex.quote(baseline)}"


def machine_profiles():
    unknown = [name for name in PERF["machines"] if name not in config["machines"]]
    if unknown:
        raise ConfigError(
            f"perf.machines names {', '.join(unknown)}, which the config's `machines` section does not define",
            "add a profile there or remove the name",
        )
    return [f"{RESULTS}/perf/machines/{name}.json" for name in ["local", *PERF["machines"]]]


def perf_process_counts(dataset):
    return PERF.get("process_counts_by_dataset", {}).get(dataset, PERF["process_counts"])


def perf_predictions():
    return [
        f"{RESULTS}/perf/predictions/{dataset}/P{P}.json"
        for dataset in PERF["datasets"]
        for P in perf_process_counts(dataset)
    ]


def perf_validation():
    """(strategy, plan dir, measurement) of every exchange measured here to check the model."""
    local = PERF["local"]
    return [
        (
            strategy,
            f"{DATA}/plans/{local['dataset']}/P{P}/{strategy}",
            f"{RESULTS}/perf/bench/{local['dataset']}/P{P}/{strategy}-{PRECISIONS[bits]}.json",
        )
        for P in local["process_counts"]
        for strategy in STRATEGIES
        for bits in local["bits"]
    ]


def variant_of(wildcards):
    return Variant.parse(wildcards.variant)


def plan_of_variant(wildcards):
    return f"{DATA}/plans/{wildcards.dataset}/P{wildcards.P}/{variant_of(wildcards).strategy}"


def train_flags(wildcards):
    variant = variant_of(wildcards)
    flags = [f"--bits {variant.bits}"] if variant.bits != 32 else []
    if variant.schedule != SYNCHRONOUS:
        flags.append(f"--schedule {variant.schedule}")
    if variant.bits == ADAPTIVE:  # the options of adaptive runs only, so others keep their params
        flags += [f"--{name.replace('_', '-')} {TRAINING[name]}" for name in adaptive_fields()]
    if variant.label_propagation:
        flags.append(f"--label-rate {TRAINING['label_rate']}")
    return " ".join(flags)


def nodes_for(wildcards):
    return math.ceil(int(wildcards.P) / EXECUTION["ranks_per_node"])


def memory_per_node(wildcards):
    """Schedulers apply mem_mb per node: the ranks that share one."""
    return min(int(wildcards.P), EXECUTION["ranks_per_node"]) * EXECUTION["mem_mb_per_rank"]
