# Distributed training: one MPI job of P ranks per (dataset, P, variant, seed).


rule train:
    input:
        graph=f"{DATA}/graphs/{{dataset}}",
        partition=f"{DATA}/partitions/{{dataset}}/P{{P}}",
        plan=plan_of_variant,
    output:
        f"{RESULTS}/runs/{{dataset}}/P{{P}}/{{variant}}/seed{{seed}}.jsonl",
    params:
        # The code hash in the name keeps an interrupted run's checkpoint from being
        # resumed by changed training code.
        checkpoint=f"{CHECKPOINTS}/{{dataset}}/P{{P}}/{{variant}}/seed{{seed}}-"
        + code("train")
        + ".pt",
        variant_flags=train_flags,
        model=TRAINING["model"],
        num_layers=TRAINING["num_layers"],
        hidden=lambda wildcards: training_for(wildcards.dataset)["hidden"],
        dropout=TRAINING["dropout"],
        layer_norm="--layer-norm" if TRAINING["layer_norm"] else "--no-layer-norm",
        input_norm="--input-norm" if TRAINING["input_norm"] else "--no-input-norm",
        aggregate_first="--aggregate-first" if TRAINING["aggregate_first"] else "--no-aggregate-first",
        rounding=TRAINING["rounding"],
        parameter_dtype=TRAINING["parameter_dtype"],
        lr=lambda wildcards: training_for(wildcards.dataset)["lr"],
        weight_decay=TRAINING["weight_decay"],
        epochs=lambda wildcards: training_for(wildcards.dataset)["epochs"],
        checkpoint_every=TRAINING["checkpoint_every"],
        code=code("train"),
        # {log} of execution.rank_output is the shell's $rank_files (set below).
        rank_output=EXECUTION.get("rank_output", "").replace("{log}", '"$rank_files"'),
    threads: lambda wildcards: int(wildcards.P) * EXECUTION["threads_per_rank"]
    resources:
        **RANK_JOB,
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/train/{dataset}/P{P}/{variant}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/train/{dataset}/P{P}/{variant}/seed{seed}.tsv"
    shell:
        # Launchers that write each rank's output to files of its own (Fujitsu MPI) are
        # given execution.rank_output; those files are appended to the log afterwards.
        "rank_files={log:q}.rank; status=0; {resources.launch} {params.rank_output} "
        "python -m supergcn.cli train --graph {input.graph:q} "
        "--partition {input.partition:q} --plan {input.plan:q} --out {output:q} "
        "--model {params.model} --num-layers {params.num_layers} --hidden {params.hidden} "
        "--dropout {params.dropout} {params.layer_norm} {params.input_norm} {params.aggregate_first} --lr {params.lr} "
        "--weight-decay {params.weight_decay} --epochs {params.epochs} --seed {wildcards.seed} "
        "--threads {resources.cpus_per_task} {params.variant_flags} --rounding {params.rounding} "
        "--parameter-dtype {params.parameter_dtype} "
        "--checkpoint {params.checkpoint:q} --checkpoint-every {params.checkpoint_every} --resume "
        "> {log:q} 2>&1 || status=$?; "
        "for rank_file in \"$rank_files\".*; do if [ -e \"$rank_file\" ]; then "
        "echo \"== $rank_file\" >> {log:q}; cat \"$rank_file\" >> {log:q}; rm -f \"$rank_file\"; fi; done; "
        # supergcn itself exits 1 (a bug) or 2 (a user error), with its message; any other
        # status means a rank was killed before it could say why.
        "if [ $status -gt 2 ]; then echo \"supergcn train: error: the MPI job ended with status $status: a rank was "
        "killed (by a signal, for memory or at the time limit) — run the same target again: training resumes from "
        "its last checkpoint\" | tee -a {log:q} >&2; fi; "
        "exit $status"
