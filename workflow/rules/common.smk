# Paths, wildcards and helpers shared by the rules. The Snakefile imports only the light modules
# supergcn.naming, supergcn.variants, supergcn.models and supergcn.methods (the cards), supergcn.plan.costs,
# supergcn.sources, supergcn.train.config,
# supergcn.workflow_config, supergcn.options, supergcn.partition.config, supergcn.data.own_files and (in the
# onstart hook) supergcn.cluster.slurm, so parsing the workflow pays for no scientific library.
import errno
import json
import math
import os
import shlex

from supergcn.naming import (
    DATASET_NAME,
    FIGURES,
    GNN_MODELS,
    PERF_FIGURES,
    PERF_TABLES,
    PRECISIONS,
    QUANTIZED_BITS,
    STRATEGIES,
    TABLES,
)
from supergcn.data.own_files import GraphFiles
from supergcn.models import card, weighted_cover_models
from supergcn.options import command_line
from supergcn.plan.costs import SHAPE_OPTIONS
from supergcn.sources import command_hash
from supergcn.train.config import TrainConfig, job_settings
from supergcn.train.precision import study_conflicts
from supergcn.variants import VARIANT_PATTERN, Variant
from supergcn.workflow_config import ConfigError, measured_process_counts

DATA = config["data_root"]
RESULTS = config["results_root"]
CHECKPOINTS = config["checkpoint_root"]
EXECUTION = config["execution"]
TRAINING = config["training"]
PERF = config["perf"]


wildcard_constraints:
    dataset=DATASET_NAME,
    P=r"\d+",
    strategy="|".join(STRATEGIES),
    model="|".join(weighted_cover_models()),
    gnn="|".join(GNN_MODELS),
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


#: Peak resident bytes per directed adjacency entry of the graph-sized steps, measured on
#: products- and papers100M-shaped graphs (docs/results.md, "Bytes per adjacency entry") and
#: rounded up, and the interpreter's own share. A plan holds one destination rank's edges at
#: a time besides 16 B per entry, so its share shrinks with P (about 30 B per entry at P = 1),
#: and about 24 B per pair of ranks with cut edges (at most P^2, at most the entries).
#: partition-rcm: run_partition(engine rcm, constraints nodes, P = 64) in a fresh process,
#: the manifest's peak_memory_mib (VmHWM) over the directed entries, on synthetic-products
#: shrunk to 1/4 (30.9 M entries: 14.2 B) and 1/2 (61.9 M: 11.5 B); the search keeps the
#: 32-bit ids resident (4 B per entry) beside a few arrays per node; 2026-11-27, 2 cores.
STEP_BYTES_PER_ENTRY = {"partition-metis": 140, "partition-kaminpar": 40, "partition-rcm": 16, "plan": 16}
PLAN_RANK_BYTES_PER_ENTRY = 32
PLAN_BYTES_PER_PAIR = 24
STEP_BASE_MB = 1024


def graph_meta(graph_dir):
    """A prepared graph's manifest. Before the graph exists the error names the graph
    directory, an input, so Snakemake defers the value computed from it."""
    meta = os.path.join(graph_dir, "meta.json")
    if not os.path.exists(meta):
        raise FileNotFoundError(errno.ENOENT, "graph not prepared yet", str(graph_dir))
    with open(meta) as handle:
        return json.load(handle)


def adjacency_entries(graph_dir):
    """Directed adjacency entries of a prepared graph, from its manifest."""
    return graph_meta(graph_dir)["num_edges_directed"]


def step_mem_mb(graph_dir, bytes_per_entry, bytes_per_pair=0, num_ranks=1):
    entries = adjacency_entries(graph_dir)
    pairs = min(num_ranks * (num_ranks - 1), entries)
    return STEP_BASE_MB + math.ceil((bytes_per_entry * entries + bytes_per_pair * pairs) / 2**20)


def partition_mem_mb(wildcards, input):
    return step_mem_mb(input[0], STEP_BYTES_PER_ENTRY[f"partition-{config['partition']['engine']}"])


def plan_mem_mb(wildcards, input):
    num_ranks = int(wildcards.P)
    per_entry = STEP_BYTES_PER_ENTRY["plan"] + PLAN_RANK_BYTES_PER_ENTRY / num_ranks
    return step_mem_mb(input.graph, per_entry, PLAN_BYTES_PER_PAIR, num_ranks)


def training_for(dataset):
    """The training settings of `dataset`: `training`, with its entry of `training_by_dataset`."""
    return {**TRAINING, **config.get("training_by_dataset", {}).get(dataset, {})}


def cover_options(wildcards):
    """The model options `supergcn plan` weighs the hybrid cover of `wildcards.model` by:
    GAT's PRE rows cost more than its POST rows (supergcn/plan/costs.py). The cover is
    weighed for float32 rows; quantized variants train on the same plan."""
    training = {**training_for(wildcards.dataset), "model": wildcards.model}
    return " ".join(f"--{name.replace('_', '-')} {training[name]}" for name in SHAPE_OPTIONS)


def own_files(wildcards):
    """The files of `wildcards.dataset` if the config declares it under own_datasets (`~`
    expanded), by role; else none. They are the job's inputs: a changed file prepares it again."""
    entry = config.get("own_datasets", {}).get(wildcards.dataset, {})
    return {role: os.path.expanduser(path) for role, path in entry.items() if path is not None}


def prepare_source(wildcards, input):
    """What `supergcn prepare` reads: the built-in dataset of that name (from raw_root), or
    your own graph's files."""
    if not input.keys():
        accept = " --accept-source-changes" if wildcards.dataset in config["accept_source_changes"] else ""
        return f"{shlex.quote(wildcards.dataset)} --raw-root {shlex.quote(config['raw_root'])}{accept}"
    files = command_line(GraphFiles, {role: input[role] for role in input.keys()})
    return shlex.join(["--name", wildcards.dataset, *files])


def partition_threads(wildcards):
    """KaMinPar's threads; METIS runs on one, so its jobs ask for no more."""
    return config["partition"]["threads"] if config["partition"]["engine"] == "kaminpar" else 1


def variants():
    """The study's variants; one that cannot run with the training options is an error now."""
    try:
        chosen = [Variant.from_config(entry, TRAINING["model"]) for entry in config["variants"]]
    except ValueError as exc:
        raise ConfigError(f"{exc} (in the config's variants list)")
    problems = [
        f"variant {variant.name}: {problem}"
        for variant in chosen
        for problem in variant_conflicts(variant)
    ]
    problems += study_conflicts(
        TRAINING["precision"], [(variant.name, variant.model, variant.method) for variant in chosen]
    )
    if problems:
        raise ConfigError("; ".join(problems) + " (in the config's variants list)")
    return chosen


def variant_conflicts(variant):
    """What a variant cannot run with: its options' conflicts with each dataset's training
    settings (training_by_dataset may set a dataset's own), and a plan its method does not take."""
    found = []
    by_dataset = config.get("training_by_dataset") or {}
    for dataset in config["datasets"]:
        where = f" (training_by_dataset.{dataset})" if dataset in by_dataset else ""
        for problem in TrainConfig(**settings_of_variant(training_for(dataset), variant, dataset)).conflicts():
            if problem + where not in found:
                found.append(problem + where)
    method = variant.method
    plans = None if method is None else method.plans_for(card(variant.model))
    if plans is not None and variant.strategy not in plans:
        found.append(
            f"{method.title} runs on a {' or '.join(plans)} plan with {card(variant.model).title}, not "
            f"{variant.strategy} — use strategy: {plans[0]}"
        )
    return found


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


def preprocessing_dirs():
    """Every step output the preprocessing table reports: graphs, partitions at every P, and
    the plans of every strategy the study trains or tabulates (hybrid, for the volumes)."""
    strategies = sorted({variant.strategy for variant in variants()} | {"hybrid"})
    return {
        "graphs": [f"{DATA}/graphs/{dataset}" for dataset in config["datasets"]],
        "partitions": [f"{DATA}/partitions/{dataset}/P{P}" for dataset in config["datasets"] for P in config["process_counts"]],
        "plan_dirs": [
            f"{DATA}/plans/{dataset}/P{P}/{strategy}"
            for dataset in config["datasets"]
            for P in config["process_counts"]
            for strategy in strategies
        ],
    }


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


def accuracy_target_flags():
    """The tables' target flags for the targets the config names (the others: the command's defaults)."""
    targets = config.get("accuracy_targets", {})
    return " ".join(f"--{kind}-targets " + " ".join(map(str, values)) for kind, values in targets.items())


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
        f"{RESULTS}/perf/predictions/{dataset}/{gnn}/P{P}.json"
        for dataset in PERF["datasets"]
        for gnn in PERF["models"]
        for P in perf_process_counts(dataset)
    ]


#: The P at which `bench comm` measures this machine: within its cores on a local run.
MEASURED_COUNTS = measured_process_counts(PERF["local"], EXECUTION["threads_per_rank"], len(os.sched_getaffinity(0)))


def perf_validation():
    """`bench comm` results holding the exchanges measured here to check the model."""
    return [f"{RESULTS}/perf/bench/comm-P{P}.json" for P in MEASURED_COUNTS]


def variant_of(wildcards):
    return Variant.parse(wildcards.variant)


def plan_dir(dataset, P, strategy, model):
    """The plan `model` trains on with `strategy`: the strategy's, or for hybrid and a model
    whose rows cost differently (GAT), the hybrid plan weighed for that model."""
    plan = f"hybrid-{model}" if strategy == "hybrid" and model in weighted_cover_models() else strategy
    return f"{DATA}/plans/{dataset}/P{P}/{plan}"


def plan_of_variant(wildcards):
    variant = variant_of(wildcards)
    return plan_dir(wildcards.dataset, wildcards.P, variant.strategy, variant.model)


def settings_of_variant(training, variant, dataset=None):
    """The options a job of `variant` reads of the `training` settings (supergcn.train.config.job_settings),
    the model's own defaults in place of those the config files leave out."""
    training = {**training, "model": variant.model}
    given = TRAINING_GIVEN | set(config.get("training_by_dataset", {}).get(dataset, {}))
    return job_settings(training, variant, given)


def train_settings(wildcards):
    """The settings file's text (JSON) of one training job: its dataset's training settings
    for its variant."""
    settings = settings_of_variant(training_for(wildcards.dataset), variant_of(wildcards), wildcards.dataset)
    return json.dumps(settings, indent=2, sort_keys=True)


def nodes_for(wildcards):
    return math.ceil(int(wildcards.P) / EXECUTION["ranks_per_node"])


def method_memory_mb(wildcards, input):
    """MiB a rank of a variant's method holds besides its share (its card's memory: MixGCN's
    copy of the whole adjacency), at its peak while built; none for the other variants and for
    jobs of no variant (bench comm)."""
    method = variant_of(wildcards).method if "variant" in wildcards.keys() else None
    if method is None or method.memory is None:
        return 0
    meta = graph_meta(input.graph)
    return math.ceil(method.memory.peak(meta["num_nodes"], meta["num_edges_directed"]) / 2**20)


def memory_per_node(wildcards, input):
    """Schedulers apply mem_mb per node: the ranks that share one, each its
    execution.mem_mb_per_rank and its copy of the adjacency where it keeps one."""
    per_rank = EXECUTION["mem_mb_per_rank"] + method_memory_mb(wildcards, input)
    return min(int(wildcards.P), EXECUTION["ranks_per_node"]) * per_rank


def mpi_resource(wildcards):
    """Marks a job of several ranks for the SLURM executor, which refuses `mpi` with one task.

    Without it, the executor runs the job inside a one-task step of its own, so the one
    rank's launcher must share that step's CPUs (`srun --overlap`, config/slurm.yaml).
    """
    return EXECUTION["mpi"] if int(wildcards.P) > 1 else None


def launch_ranks(wildcards):
    """The launcher of P ranks, e.g. `mpiexec -n 4`. srun (Slurm >= 22.05) no longer takes
    the job's cpus-per-task for its step, so SRUN_CPUS_PER_TASK hands it every rank's threads."""
    return f"SRUN_CPUS_PER_TASK={EXECUTION['threads_per_rank']} {EXECUTION['mpi']} -n {wildcards.P}"


#: What a job of P MPI ranks asks of a scheduler (train, bench comm). The
#: launcher is a resource, not a parameter, so that moving a study between machines (mpiexec
#: here, srun there) does not rerun its finished jobs. ranks_per_node reaches PJM's
#: max-proc-per-node (the fugaku profile): the study's, which an overlay may change.
RANK_JOB = dict(
    mpi=mpi_resource,
    launch=launch_ranks,
    tasks=lambda wildcards: int(wildcards.P),
    nodes=nodes_for,
    ranks_per_node=EXECUTION["ranks_per_node"],
    cpus_per_task=EXECUTION["threads_per_rank"],
    runtime=EXECUTION["runtime_minutes"],
    mem_mb=memory_per_node,
)


onstart:
    # Before the SLURM executor submits anything (never in dry runs or inside jobs), check
    # the cluster against the jobs about to be submitted: status queries, account,
    # partition, and a node for every rank job; and let it see cancelled jobs fail.
    if workflow.executor_plugin.name == "slurm":
        from supergcn.cluster.slurm import RankJob, check_cluster, recognise_cancelled_jobs

        recognise_cancelled_jobs()

        rank_jobs = [
            RankJob(
                rule=job.rule.name,
                wildcards=", ".join(f"{key}={value}" for key, value in job.wildcards_dict.items()),
                account=job.resources.get("slurm_account"),
                partition=job.resources.get("slurm_partition"),
                nodes=job.resources.get("nodes"),
                tasks=job.resources.get("tasks"),
                cpus_per_task=job.resources.get("cpus_per_task"),
                mem_mb=job.resources.get("mem_mb"),
            )
            for job in workflow.dag.needrun_jobs()
            if not job.is_local and "launch" in job.resources.keys()
        ]
        settings = workflow.executor_settings
        problems = check_cluster(rank_jobs, settings.status_command, settings.init_seconds_before_status_checks)
        if problems:
            raise SystemExit("\n".join(f"supergcn slurm: error: {problem}" for problem in problems))
