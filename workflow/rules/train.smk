# Distributed training: one MPI job of P ranks per (dataset, P, variant, seed).
# A study's own jobs (these, results.smk's and perf.smk's) log under its results_root, so
# that two studies never write the same log; the data steps they share log under logs/.


localrules:
    train_settings,


rule train_settings:
    # The options a training job reads (supergcn/train/config.py), written once per job: a
    # change of one reruns exactly the jobs that read it. A shell command, not `run:`: Snakemake
    # runs a `run:` job in a new Snakemake process, which parses the workflow again (4 s a job).
    output:
        f"{RESULTS}/runs/{{dataset}}/P{{P}}/{{variant}}/seed{{seed}}.settings.json",
    params:
        settings=train_settings,
    log:
        f"{RESULTS}/logs/train_settings/{{dataset}}/P{{P}}/{{variant}}/seed{{seed}}.log",
    conda:
        "../envs/supergcn.yaml"
    shell:
        "(printf '%s\\n' {params.settings:q} > {output:q} && echo wrote {output:q}) > {log:q} 2>&1"


rule train:
    input:
        graph=f"{DATA}/graphs/{{dataset}}",
        partition=f"{DATA}/partitions/{{dataset}}/P{{P}}",
        plan=plan_of_variant,
        settings=rules.train_settings.output[0],
    output:
        f"{RESULTS}/runs/{{dataset}}/P{{P}}/{{variant}}/seed{{seed}}.jsonl",
    params:
        code=code("train"),
    threads: lambda wildcards: int(wildcards.P) * EXECUTION["threads_per_rank"]
    # Where the job keeps its checkpoint, how its ranks' output is collected and what a rank
    # may hold are the machine's, not the run's: resources, as the launcher, so that a study
    # moved to another machine (another checkpoint_root, Fujitsu MPI's rank files, nodes of
    # another size) does not rerun its finished jobs.
    resources:
        **RANK_JOB,
        # The code hash in the name keeps an interrupted run's checkpoint from being
        # resumed by changed training code.
        checkpoint=lambda wildcards: f"{CHECKPOINTS}/{wildcards.dataset}/P{wildcards.P}/{wildcards.variant}/"
        f"seed{wildcards.seed}-{code('train')}.pt",
        # Launchers that write each rank's output to files of its own (Fujitsu MPI) are
        # given execution.rank_output; supergcn train names the files from the log (its
        # {log}, so a function: Snakemake would take it for a wildcard) and appends them.
        rank_output=lambda wildcards: (
            f"--rank-output {shlex.quote(EXECUTION['rank_output'])}" if EXECUTION.get("rank_output") else ""
        ),
        # What supergcn train refuses a MixGCN copy of the adjacency beyond, before it starts
        # the ranks.
        memory_per_rank=EXECUTION["mem_mb_per_rank"],
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/train/{{dataset}}/P{{P}}/{{variant}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/logs/benchmarks/train/{{dataset}}/P{{P}}/{{variant}}/seed{{seed}}.tsv"
    shell:
        # supergcn train starts the ranks with the launcher, writes their output to the log
        # and says when the job was killed (a rerun resumes from the last checkpoint).
        "python -m supergcn.cli train --settings {input.settings:q} --graph {input.graph:q} "
        "--partition {input.partition:q} --plan {input.plan:q} --out {output:q} --seed {wildcards.seed} "
        "--threads {resources.cpus_per_task} --checkpoint {resources.checkpoint:q} --resume "
        "--memory-per-rank {resources.memory_per_rank} --launcher {resources.launch:q} {resources.rank_output} "
        "--log {log:q}"
