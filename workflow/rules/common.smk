# Paths, wildcards and helpers shared by the rules.
import hashlib
import json
import math
import os
import shlex
from pathlib import Path

import supergcn
from supergcn.results import variant_name

DATA = config["data_root"]
RESULTS = config["results_root"]
CHECKPOINTS = config["checkpoint_root"]
EXECUTION = config["execution"]
TRAINING = config["training"]
MODEL = config["model"]
PACKAGE_DIR = Path(supergcn.__file__).parent
# Snakemake sees edits of a rule's own code, not of the package its shell calls, so each
# step carries a hash of the sources it runs as a parameter: editing them reruns it.
STEP_SOURCES = {
    "prepare": ["graph.py", "storage.py", "datasets/*.py"],
    "partition": ["graph.py", "storage.py", "partition.py"],
    "plan": ["graph.py", "storage.py", "partition.py", "plan.py", "cover.py"],
    "train": ["aggregation.py", "comm.py", "models.py", "train.py", "timing.py", "plan.py", "kernels.py",
              "quantization.py", "graph.py", "partition.py", "storage.py", "cli.py"],
    "results": ["results.py", "volume.py", "quantization.py", "plan.py", "storage.py", "cli.py"],
    # Measurements of this machine rerun when the code they measure changes, not the model.
    "bench_comm": ["commbench.py", "ranks.py", "storage.py", "cli.py"],
    "bench_exchange": ["commbench.py", "ranks.py", "comm.py", "aggregation.py", "quantization.py", "kernels.py",
                       "timing.py", "plan.py", "storage.py", "cli.py"],
    "local_machine": ["machines.py", "perfmodel.py", "volume.py", "bench.py", "kernels.py", "quantization.py", "graph.py",
                      "storage.py", "cli.py"],
    "model": ["perfmodel.py", "volume.py", "modelstudy.py", "machines.py", "results.py", "quantization.py", "plan.py", "graph.py",
              "storage.py", "cli.py"],
}
MODEL_TABLES = ["model_hybrid", "model_predictions", "model_regime", "model_crossover", "model_cost",
                "model_validation"]
PRECISIONS = {32: "fp32", 8: "int8", 4: "int4", 2: "int2"}


wildcard_constraints:
    dataset=r"[A-Za-z0-9_\-]+",
    P=r"\d+",
    strategy=r"pre|post|hybrid",
    precision=r"fp32|int8|int4|int2",
    lp=r"lp|nolp",
    seed=r"\d+",
    machine=r"[A-Za-z0-9_\-]+",


def source_hash(step):
    digest = hashlib.blake2b(digest_size=8)
    for pattern in STEP_SOURCES[step]:
        for path in sorted(PACKAGE_DIR.glob(pattern)):
            digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def variant_names():
    return [variant_name(v["strategy"], v["bits"], v["label_propagation"]) for v in config["variants"]]


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


def precision_bits(precision):
    return {name: bits for bits, name in PRECISIONS.items()}[precision]


def machine_profiles():
    unknown = [name for name in MODEL["machines"] if name not in config["machines"]]
    if unknown:
        raise ValueError(
            f"model.machines names {', '.join(unknown)}, which the config's `machines` section does not define: "
            "add a profile there or remove the name"
        )
    return [f"{RESULTS}/model/machines/{name}.json" for name in ["local", *MODEL["machines"]]]


def model_process_counts(dataset):
    return MODEL.get("process_counts_by_dataset", {}).get(dataset, MODEL["process_counts"])


def model_predictions():
    return [
        f"{RESULTS}/model/predictions/{dataset}/P{P}.json"
        for dataset in MODEL["datasets"]
        for P in model_process_counts(dataset)
    ]


def model_validation():
    """(strategy, plan dir, measurement) of every exchange measured here to check the model."""
    local = MODEL["local"]
    return [
        (
            strategy,
            f"{DATA}/plans/{local['dataset']}/P{P}/{strategy}",
            f"{RESULTS}/model/bench/{local['dataset']}/P{P}/{strategy}-{PRECISIONS[bits]}.json",
        )
        for P in local["process_counts"]
        for strategy in ("pre", "post", "hybrid")
        for bits in local["bits"]
    ]


def train_flags(wildcards):
    bits = precision_bits(wildcards.precision)
    flags = [f"--bits {bits}"] if bits != 32 else []
    if wildcards.lp == "lp":
        flags.append(f"--label-rate {TRAINING['label_rate']}")
    return " ".join(flags)


def nodes_for(wildcards):
    return math.ceil(int(wildcards.P) / EXECUTION["ranks_per_node"])


def memory_per_node(wildcards):
    """Schedulers apply mem_mb per node: the ranks that share one."""
    return min(int(wildcards.P), EXECUTION["ranks_per_node"]) * EXECUTION["mem_mb_per_rank"]
