"""What the workflow plans for each config file, overlay, study and profile: dry runs (and
rule train_settings alone, in copies of the workflow), all forked from one started Snakemake."""

import json
import math
import re
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from conftest import (
    REPO,
    copy_workflow,
    planned_jobs,
    skip_where_the_shared_datasets_are_missing,
    snakemake_each,
    snakemake_environment,
    train_jobs,
)

#: A dry run of every job of the study, as if nothing were built: the checkout's own
#: results/ (after `make run`) must not change what a test of the plan sees.
FROM_SCRATCH = ("-n", "--forceall")


#: The Snakemake runs of the tests below that depend on nothing another test does, each
#: registered beside its test by :func:`run_of`: name -> (arguments, config overlay,
#: variables added, whether it runs in a copy of the workflow).
RUNS: dict[str, tuple] = {}


def run_of(name: str, *arguments, overlay: dict | None = None, env: dict | None = None,
           in_copy: bool = False) -> str:
    """Register a run of :func:`snakemake_runs`.

    Args:
        name: what its test looks it up by.
        arguments: Snakemake's arguments.
        overlay: a config overlay written for the run and given after ``arguments``.
        env: variables the run adds to :func:`conftest.snakemake_environment`, ``{folder}``
            in a value standing for a folder of the run's own.
        in_copy: whether it runs in a copy of the workflow in that folder (else in the checkout).

    Returns:
        ``name``.
    """
    assert name not in RUNS, f"two runs named {name}"
    RUNS[name] = (arguments, overlay, env or {}, in_copy)
    return name


@pytest.fixture(scope="module")
def snakemake_runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Every run of :data:`RUNS`, each in a folder of its own, forked from one started
    Snakemake (:func:`conftest.snakemake_each`): a dry run is mostly Snakemake's start-up.
    Returns name -> (the run, the folder it ran in)."""
    root = tmp_path_factory.mktemp("runs")
    commands, folders = [], []
    for index, (arguments, overlay, env, in_copy) in enumerate(RUNS.values()):
        folder = root / f"run{index}"
        folder.mkdir()
        cwd = copy_workflow(folder / "wf") if in_copy else REPO
        given = [*arguments, *([] if overlay is None else [write_overlay(folder, **overlay)])]
        added = {key: value.replace("{folder}", str(folder)) for key, value in env.items()}
        commands.append((given, snakemake_environment(added), cwd))
        folders.append(cwd if in_copy else folder)
    return {name: (run, folder) for name, run, folder in
            zip(RUNS, snakemake_each(commands, root / "output"), folders)}


def write_overlay(tmp_path, **values) -> Path:
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


# A 3-bit variant, a negative learning rate, a variant that cannot run and the old `model:`
# key are tests/cli/test_bad_inputs.py's config refusals, held to these checks and more.
@pytest.mark.parametrize("run, key", [
    (run_of(f"schema: {key}", "-n", "--configfiles", "config/config.yaml", overlay=override), key)
    for override, key in [({"process_counts": [0, 2]}, "process_counts"),
                          ({"variants": [{"strategy": "both", "bits": 32, "label_propagation": False}]}, "strategy"),
                          ({"datasets": ["ogbn-nope"]}, "datasets")]])
def test_schema_violations_fail_before_any_job(snakemake_runs, run, key):
    result, _ = snakemake_runs[run]
    assert result.returncode != 0
    errors = [line for line in (result.stderr + result.stdout).splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("supergcn config: error: ") and key in errors[0]
    assert "Job stats" not in result.stdout


@pytest.mark.parametrize("run, message", [
    (run_of(f"config error {index}", "-n", "--configfiles", "config/config.yaml", overlay=override), message)
    for index, (override, message) in enumerate([
        ({"trainig": {}, "training": {"epoch": 3}}, "trainig: unknown key (did you mean training?); training.epoch: "
         "unknown key (did you mean training.epochs?) — fix it in your config file or overlay"),
        ({"speedup_baseline": "nope"}, "speedup_baseline 'nope' is not a variant of this study"),
        ({"variants": [{"strategy": "hybrid", "bits": 32, "label_propagation": False, "model": "gat", "sar": "sar"}],
          "training": {"precision": "fp32"}},
         "variant hybrid-fp32-nolp-sar-gat: SAR runs on a post plan with GAT, not hybrid — use strategy: post")])])
def test_a_config_error_is_its_line_alone(snakemake_runs, run, message):
    """Found by the schema or by the rules as they read the config: one line and status 2,
    none of Snakemake's lines about where in the workflow's code it was raised."""
    result, _ = snakemake_runs[run]
    assert result.returncode == 2
    lines = [line for line in (result.stdout + result.stderr).splitlines()
             if line.strip() and not line.startswith("Config file config/config.yaml is extended")]
    assert len(lines) == 1 and lines[0].startswith(f"supergcn config: error: {message}"), lines


TWO_STUDIES = [run_of(f"study {index}", *FROM_SCRATCH, "--configfiles", "config/config.yaml", *overlays)
               for index, overlays in enumerate([[], ["config/studies/paper-comparison-laptop.yaml"]])]


def test_two_studies_share_the_logs_of_the_data_steps_only(snakemake_runs):
    """Two overlays train the same graphs: each writes its jobs' logs and benchmark records
    of its own; only the steps they share (prepare, partition, plan: the same outputs)
    log to the same files."""
    logs = []
    for run in TWO_STUDIES:
        result, _ = snakemake_runs[run]
        assert result.returncode == 0, result.stderr
        assert planned_jobs(result.stdout).get("train", 0) > 0
        logs.append(set(re.findall(r"^\s+(?:log|benchmark): (\S+)", result.stdout, re.M)))
    shared = logs[0] & logs[1]
    assert shared and all(re.match(r"logs/(benchmarks/)?(prepare|partition|plan)/", path) for path in shared), \
        sorted(shared)


FUGAKU = run_of("fugaku", *FROM_SCRATCH, "--profile", "workflow/profiles/fugaku", "--configfiles",
                "config/config.yaml", "config/fugaku.yaml", overlay={"process_counts": [1, 4, 6, 16]})


def test_fugaku_profile_requests_nodes_and_processes_per_train_job(snakemake_runs):
    from supergcn.cluster.pjm import pjm_script, read_site

    result, _ = snakemake_runs[FUGAKU]
    assert result.returncode == 0, result.stderr
    jobs = train_jobs(result.stdout)
    assert sorted({int(j["wildcards"]["P"]) for j in jobs}) == [1, 4, 6, 16]
    site = read_site(REPO / "config" / "fugaku.yaml")
    for job in jobs:
        procs, resources = int(job["wildcards"]["P"]), job["resources"]
        assert int(resources["tasks"]) == procs
        assert int(resources["nodes"]) == math.ceil(procs / 4)
        assert int(resources["cpus_per_task"]) == 12
        script = pjm_script("job.sh", site, "t", int(resources["nodes"]), int(resources["tasks"]),
                            int(resources["cpus_per_task"]), int(resources["runtime"]), "logs").splitlines()
        assert f'#PJM -L "node={math.ceil(procs / 4)}"' in script
        assert f'#PJM --mpi "proc={procs}"' in script
        assert '#PJM --mpi "max-proc-per-node=4"' in script


FUGAKU_TWO_A_NODE = run_of("fugaku, 2 ranks a node", *FROM_SCRATCH, "--profile", "workflow/profiles/fugaku",
                           "--configfiles", "config/config.yaml", "config/fugaku.yaml",
                           overlay={"process_counts": [6], "execution": {"ranks_per_node": 2}})


def test_an_overlay_s_ranks_per_node_reaches_pjm_through_the_profile(snakemake_runs):
    """The profile's submit command, given a train job's resources, asks PJM for the
    overlay's ranks a node, not the site file's (config/fugaku.yaml: 4)."""
    from supergcn.cli import build_parser
    from supergcn.cluster.pjm import pjm_script, read_site

    result, _ = snakemake_runs[FUGAKU_TWO_A_NODE]
    assert result.returncode == 0, result.stderr
    profile = yaml.safe_load((REPO / "workflow" / "profiles" / "fugaku" / "config.yaml").read_text())
    for job in train_jobs(result.stdout):
        resources = {key: str(value) for key, value in job["resources"].items()}
        command = profile["cluster-generic-submit-cmd"].format(name="t", resources=SimpleNamespace(**resources))
        words = shlex.split(command)
        args = build_parser(["pjm"]).parse_args([*words[1:], "job.sh"])
        script = pjm_script(args.jobscript, read_site(REPO / args.site), args.name, args.nodes, args.procs,
                            args.threads, args.elapse_minutes, args.log_dir, args.ranks_per_node).splitlines()
        assert '#PJM -L "node=3"' in script and '#PJM --mpi "max-proc-per-node=2"' in script


# The docs name profiles by path: no profile in the user's config folder is needed or read.
NOTHING_INSTALLED = {"HOME": "{folder}", "XDG_CONFIG_HOME": "{folder}/.config"}
PROFILE_BY_PATH = [run_of(f"profile {profile}", *FROM_SCRATCH, "--profile", profile, env=NOTHING_INSTALLED)
                   for profile in ("workflow/profiles/fugaku", "fugaku")]


def test_a_profile_named_by_its_path_applies_with_nothing_installed(snakemake_runs):
    (result, _), (bare, _) = (snakemake_runs[run] for run in PROFILE_BY_PATH)
    assert result.returncode == 0, result.stderr
    assert "Using profile workflow/profiles/fugaku" in result.stdout + result.stderr
    assert train_jobs(result.stdout)[0]["resources"]["cpus_per_task"] == "12"
    assert bare.returncode != 0 and "no profile.yaml (or config.yaml) found" in bare.stderr


def test_no_default_workflow_profile_can_override_a_cluster_profile():
    # Snakemake 9 silently applies profiles/default (beside the Snakefile or in workflow/)
    # on top of --profile; the project ships none.
    for candidate in ("profiles/default", "workflow/profiles/default"):
        assert not (REPO / candidate).exists()


SLURM = run_of("slurm", *FROM_SCRATCH, "-p", "--profile", "workflow/profiles/slurm")


def test_slurm_profile_dry_run_launches_with_srun_pmi2_and_one_rank_jobs_without_mpi(snakemake_runs):
    # The SLURM executor refuses the `mpi` resource with one task; its srun needs --mpi=pmi2
    # where Slurm's MpiDefault is none, and SRUN_CPUS_PER_TASK since Slurm 22.05 (tests/cluster/test_slurm.py
    # runs all of it on a real Slurm).
    result, _ = snakemake_runs[SLURM]
    assert result.returncode == 0, result.stderr
    jobs = train_jobs(result.stdout)
    launcher = yaml.safe_load((REPO / "config" / "slurm.yaml").read_text())["execution"]["mpi"]
    assert launcher.startswith("srun --mpi=pmi2")
    assert {int(job["wildcards"]["P"]) for job in jobs} >= {1, 2}
    for job in jobs:
        procs, resources = int(job["wildcards"]["P"]), job["resources"]
        assert resources.get("mpi") == (launcher if procs > 1 else None)
        assert int(resources["tasks"]) == procs
        assert resources["cpus_per_task"] == "8" and resources["runtime"] == "60"
        assert re.search(rf"^Shell command: python -m supergcn.cli train --settings \S*/P{procs}/\S*settings.json .*"
                         rf"--out \S*/P{procs}/.* --threads 8 .*--launcher "
                         rf"'SRUN_CPUS_PER_TASK=8 {re.escape(launcher)} -n {procs}' ", result.stdout, re.M)


def test_on_a_cluster_the_machine_profile_asks_for_the_threads_it_runs(snakemake_runs):
    """perf profile runs one rank's threads: on a cluster (perf.local.within_cores off) its
    job asks the scheduler for those, not for every rank's cores of the largest bench comm."""
    result, _ = snakemake_runs[SLURM]
    threads = yaml.safe_load((REPO / "config" / "slurm.yaml").read_text())["execution"]["threads_per_rank"]
    block = result.stdout.split("rule local_machine:")[1].split("\n\n")[0]
    # The SLURM executor asks for cpus_per_task where a job sets it, else for its threads.
    assert f"cpus_per_task={threads}" in re.search(r"resources: (.*)", block).group(1).split(", ")
    assert f"--threads {threads} " in block


SLURM_RESOURCES = run_of("slurm resources", *FROM_SCRATCH, "--profile", "workflow/profiles/slurm",
                         "--default-resources", "slurm_account=a")


def test_overriding_default_resources_keeps_every_job_s_runtime(snakemake_runs):
    # --default-resources replaces a profile's whole list; runtime lives in the rules instead.
    result, _ = snakemake_runs[SLURM_RESOURCES]
    assert result.returncode == 0, result.stderr
    local = {"all", *(name for rules in (REPO / "workflow" / "rules").glob("*.smk")
                      for block in re.findall(r"^localrules:\n((?:    \w+,\n)+)", rules.read_text(), re.M)
                      for name in re.findall(r"\w+", block))}
    submitted = [block for block in result.stdout.split("\nrule ")[1:] if block.split(":")[0] not in local]
    assert {block.split(":")[0] for block in submitted} >= {"partition", "plan", "train", "bench_comm"}
    for block in submitted:
        assert "runtime=60" in block and "slurm_account=a" in block, block


UNKNOWN_MACHINE = run_of("unknown machine", "-n", "--configfiles", "config/config.yaml",
                         overlay={"perf": {"machines": ["fugaku", "summit"]}})


def test_unknown_machine_name_is_reported(snakemake_runs):
    result, _ = snakemake_runs[UNKNOWN_MACHINE]
    assert result.returncode != 0
    assert "perf.machines names summit" in result.stderr + result.stdout


def settings_run(name: str, *configfiles, overlay: dict | None = None) -> str:
    """Register (:func:`run_of`) rule train_settings alone of the study of ``configfiles``
    (and ``overlay``), run in a copy of the workflow."""
    return run_of(name, "--cores", 1, "--until", "train_settings", "--configfiles",
                  *(REPO / path for path in configfiles), overlay=overlay, in_copy=True)


def study_settings(snakemake_runs, run: str) -> dict[str, dict]:
    """Every training job's settings file of :func:`settings_run`'s ``run``, by variant;
    the jobs of one variant must agree."""
    result, workdir = snakemake_runs[run]
    assert result.returncode == 0, result.stderr[-3000:]
    by_variant = {}
    for path in workdir.glob("results/**/*.settings.json"):
        by_variant.setdefault(path.parent.name, []).append(json.loads(path.read_text()))
    assert by_variant and all(settings == jobs[0] for jobs in by_variant.values() for settings in jobs)
    return {variant: jobs[0] for variant, jobs in by_variant.items()}


QUANTIZED_AND_LABELS = settings_run(
    "quantized and labels", "config/config.yaml",
    overlay={"variants": [{"strategy": "hybrid", "bits": 2, "label_propagation": True},
                          {"strategy": "hybrid", "bits": 32, "label_propagation": False}]})


def test_quantized_and_label_propagation_variants_reach_the_trainer(snakemake_runs):
    settings = study_settings(snakemake_runs, QUANTIZED_AND_LABELS)
    assert settings["hybrid-int2-lp"]["bits"] == 2 and settings["hybrid-int2-lp"]["label_rate"] == 0.62
    assert settings["hybrid-int2-lp"]["label_draw"] == "exact"
    assert settings["hybrid-fp32-nolp"]["label_rate"] == 0 and "label_draw" not in settings["hybrid-fp32-nolp"]
    assert not any(name.startswith("adaptive_") for variant in settings.values() for name in variant)
    assert settings["hybrid-fp32-nolp"]["epochs"] == 40 and settings["hybrid-fp32-nolp"]["model"] == "sage"


A_VARIANTS_MODEL = settings_run(
    "a variant's model", "config/config.yaml",
    overlay={"variants": [{"strategy": "post", "bits": 2, "label_propagation": False, "model": "gat"},
                          {"strategy": "post", "bits": 2, "label_propagation": False}]})


def test_a_variants_model_reaches_the_trainer_with_its_options(snakemake_runs):
    settings = study_settings(snakemake_runs, A_VARIANTS_MODEL)
    assert settings["post-int2-nolp-gat"]["model"] == "gat" and settings["post-int2-nolp-gat"]["heads"] == 4
    assert settings["post-int2-nolp"]["model"] == "sage" and "heads" not in settings["post-int2-nolp"]


INT2_ACCURACY = run_of("int2 accuracy", *FROM_SCRATCH, "--configfiles", "config/config.yaml",
                       "config/studies/int2-accuracy.yaml")


def test_int2_accuracy_study_plans_every_run(snakemake_runs):
    result, _ = snakemake_runs[INT2_ACCURACY]
    assert result.returncode == 0, result.stderr
    assert planned_jobs(result.stdout)["train"] == 4 * 4 * 4 * 5
    assert "results/int2-accuracy/tables/accuracy.md" in result.stdout


PAPER_COMPARISON = run_of("paper comparison", *FROM_SCRATCH, "-p", "--configfiles", "config/config.yaml",
                          "config/studies/paper-comparison.yaml")


def test_paper_comparison_study_runs_distgnn_and_adaptive_bits_beside_supergcn(snakemake_runs):
    result, _ = snakemake_runs[PAPER_COMPARISON]
    assert result.returncode == 0, result.stderr
    assert planned_jobs(result.stdout)["train"] == 12 * 2 * 3
    commands = [line for line in result.stdout.splitlines() if "supergcn.cli train" in line]
    distgnn = [c for c in commands if "pre-fp32-nolp-cd-5/" in c]
    assert distgnn and all("/hybrid " not in c and "/pre " in c for c in distgnn)
    # BNS-GCN, PipeGCN and SAR train on the post plan, as published.
    for variant in ("post-fp32-nolp-bns0.1/", "post-fp32-nolp-bns0.01/", "post-fp32-nolp-pipe/",
                    "post-fp32-nolp-sar/"):
        runs = [c for c in commands if variant in c]
        assert len(runs) == 2 * 3 and all("/post " in c for c in runs)
    # MixGCN's row blocks are the hybrid plan's parts; it is told the memory a rank may use.
    mixgcn = [c for c in commands if "hybrid-fp32-nolp-mop/" in c]
    assert len(mixgcn) == 2 * 3 and all("/hybrid " in c and "--memory-per-rank 2000 " in c for c in mixgcn)
    # DistGNN-MB samples the hybrid plan's parts; its settings file holds its batch.
    distgnn_mb = [c for c in commands if "hybrid-fp32-nolp-mb1000/" in c]
    assert len(distgnn_mb) == 2 * 3 and all("/hybrid " in c for c in distgnn_mb)
    tables = [line for line in result.stdout.splitlines() if "supergcn.cli tables" in line]
    assert tables and "--baseline pre-fp32-nolp-cd-5" in tables[0]


#: DistGNN-MB's studies: (their datasets, process counts and mini-batch variant) by run.
DISTGNN_MB_STUDIES = {
    run_of(f"study {study}", *FROM_SCRATCH, "-p", "--configfiles", "config/config.yaml",
           f"config/studies/{study}.yaml"): (study, datasets, counts, minibatch)
    for study, datasets, counts, minibatch in [
        ("distgnn-mb-accuracy", ["cora", "citeseer"], [1, 4], "hybrid-fp32-nolp-mb32"),
        ("distgnn-mb-accuracy-facebook", ["facebook"], [1, 4], "hybrid-fp32-nolp-mb1000"),
        ("distgnn-mb-epoch", ["synthetic-arxiv"], [1, 2, 3, 4], "hybrid-fp32-nolp-mb1000")]}


def test_the_distgnn_mb_studies_train_mini_batches_beside_full_batches(snakemake_runs):
    """The studies' dry runs: every dataset, P, variant and seed, the full-batch run beside
    DistGNN-MB's."""
    for run, (study, datasets, counts, minibatch) in DISTGNN_MB_STUDIES.items():
        result, _ = snakemake_runs[run]
        if result.returncode != 0:
            skip_where_the_shared_datasets_are_missing(result.stderr)
        assert result.returncode == 0, result.stderr
        seeds = len(yaml.safe_load((REPO / "config" / "studies" / f"{study}.yaml").read_text())["seeds"])
        trained = re.findall(r"cli train --settings \S+/runs/(\S+)/P(\d+)/(\S+)/seed\d+\.settings\.json",
                             result.stdout)
        assert sorted(set(trained)) == sorted((dataset, str(p), variant) for dataset in datasets for p in counts
                                              for variant in ("hybrid-fp32-nolp", minibatch))
        assert planned_jobs(result.stdout)["train"] == len(trained) == len(set(trained)) * seeds


MODELS = run_of("models", *FROM_SCRATCH, "-p", "--configfiles", "config/config.yaml", "config/studies/models.yaml")


def test_models_study_trains_each_model_on_its_own_plan(snakemake_runs):
    """config/studies/models.yaml: four models, FP32 and Int2, every strategy; hybrid GAT on
    a plan whose cover is weighed by GAT's row costs, the others on the fewest rows'."""
    result, _ = snakemake_runs[MODELS]
    assert result.returncode == 0, result.stderr
    assert planned_jobs(result.stdout)["train"] == 4 * 3 * 2 * 2
    assert planned_jobs(result.stdout)["plan_weighted"] == 2  # one per graph at P = 4
    commands = [line for line in result.stdout.splitlines() if "supergcn.cli train" in line]
    gat_hybrid = [c for c in commands if "/hybrid-fp32-nolp-gat/" in c or "/hybrid-int2-nolp-gat/" in c]
    assert len(gat_hybrid) == 4 and all("/P4/hybrid-gat " in c for c in gat_hybrid)
    assert all("/P4/hybrid " in c for c in commands if "/hybrid-fp32-nolp-gin/" in c)
    weighted = [line for line in result.stdout.splitlines() if "--strategy hybrid --model gat" in line]
    assert weighted and all("--num-layers 3 --hidden 256 --heads 4" in line for line in weighted)


PAPER_COMPARISON_SETTINGS = settings_run("paper comparison settings", "config/config.yaml",
                                         "config/studies/paper-comparison.yaml")


def test_the_paper_comparison_hands_its_jobs_the_schedules_and_adaptive_bits(snakemake_runs):
    settings = study_settings(snakemake_runs, PAPER_COMPARISON_SETTINGS)
    assert settings["pre-fp32-nolp-cd-5"]["schedule"] == "cd-5"
    adaptive = settings["hybrid-adaptive-lp"]
    assert adaptive["bits"] == "adaptive" and adaptive["adaptive_period"] == 20
    # Only MixGCN's jobs read the parallelism: the others' settings, and so their jobs, stay as they were.
    assert settings["hybrid-fp32-nolp-mop"]["parallelism"] == "mop"
    assert [name for name, job in settings.items() if "parallelism" in job] == ["hybrid-fp32-nolp-mop"]
    assert not any("memory_per_rank" in job for job in settings.values())
    # Only DistGNN-MB's read the mini-batch options: its batch, and its paper's settings.
    assert {key: settings["hybrid-fp32-nolp-mb1000"][key] for key in ("batch_size", "fanouts", "hec_push")} == {
        "batch_size": 1000, "fanouts": "5,10,15", "hec_push": 2000}
    assert [name for name, job in settings.items() if "batch_size" in job] == ["hybrid-fp32-nolp-mb1000"]


PREPOST = run_of("prepost", *FROM_SCRATCH, "--profile", "workflow/profiles/fugaku-prepost")


def test_the_prepost_profile_preprocesses_and_stops_before_training(snakemake_runs):
    result, _ = snakemake_runs[PREPOST]
    assert result.returncode == 0, result.stderr
    assert set(planned_jobs(result.stdout)) == {"prepare", "partition", "plan"}


TABLE2 = run_of("table 2", *FROM_SCRATCH, "-p", "--configfiles", "config/config.yaml",
                "config/studies/paper-table2.yaml")


def test_the_table2_study_plans_every_graph_at_every_process_count(snakemake_runs):
    """config/studies/paper-table2.yaml: the eight graphs of the paper's Table 2, the three
    that fit a node trained at Table 3's counts, the five largest partitioned, planned and
    predicted at the paper's, each with its own Table 2 settings."""
    study = yaml.safe_load((REPO / "config" / "studies" / "paper-table2.yaml").read_text())
    result, _ = snakemake_runs[TABLE2]
    assert result.returncode == 0, result.stderr
    jobs = planned_jobs(result.stdout)
    graphs = [*study["datasets"], *study["perf"]["datasets"]]
    assert len(set(graphs)) == 8 == jobs["prepare"] and set(graphs) == set(study["training_by_dataset"])
    perf = study["perf"]
    predicted = {(dataset, int(p)) for dataset, p in re.findall(r"perf predict --graph data/graphs/(\S+) .*?"
                                                                 r"data/partitions/\S+/P(\d+)", result.stdout)}
    assert predicted == {(dataset, p) for dataset in perf["datasets"]
                         for p in perf.get("process_counts_by_dataset", {}).get(dataset, perf["process_counts"])}
    # GAT beside SAGE, each on the plan it trains on: GAT's weighted cover, a plan of its own.
    models = re.findall(r"perf predict .*--model (\w+) ", result.stdout)
    assert sorted(set(models)) == sorted(perf["models"]) == ["gat", "sage"]
    assert models.count("gat") == models.count("sage") == len(predicted) == jobs["plan_weighted"]
    trained = {(dataset, int(p)) for dataset, p in re.findall(r"train --settings \S+ --graph data/graphs/(\S+) "
                                                              r"--partition data/partitions/\S+/P(\d+)", result.stdout)}
    assert trained == {(dataset, p) for dataset in study["datasets"] for p in study["process_counts"]}
    assert jobs["train"] == len(trained) * len(study["variants"])
    # UK-2007-05's own width (Table 2: 128) reaches its predictions; papers100M's learning rate its runs' config.
    assert re.search(r"perf predict --graph data/graphs/uk-2007-05 .*--hidden 128 ", result.stdout)
    assert not re.search(r"perf predict --graph data/graphs/uk-2007-05 .*--hidden 256 ", result.stdout)
    # The volume table counts each trained graph at its own width.
    widths = " ".join(f"{dataset}={study['training_by_dataset'][dataset]['hidden']}" for dataset in study["datasets"])
    assert re.search(rf"supergcn.cli tables .*--hidden-by-dataset {widths} ", result.stdout)


GIN = {"strategy": "post", "bits": 32, "label_propagation": False, "model": "gin"}


@pytest.mark.parametrize("run, training, gin_lr", [
    (settings_run(f"model defaults {training}", "config/config.yaml",
                  overlay={"variants": [GIN, {**GIN, "model": "sage"}], "training": training}), training, gin_lr)
    for training, gin_lr in [({}, 0.001), ({"lr": 0.02}, 0.02)]])
def test_a_models_own_defaults_reach_its_jobs_unless_the_config_sets_them(snakemake_runs, run, training, gin_lr):
    """GIN's card sets its own learning rate: its jobs train at it where no config file sets
    ``training.lr``; the other models keep the option's default, or the config's value."""
    settings = study_settings(snakemake_runs, run)
    assert settings["post-fp32-nolp-gin"]["lr"] == gin_lr
    assert settings["post-fp32-nolp"]["lr"] == training.get("lr", 0.01)
