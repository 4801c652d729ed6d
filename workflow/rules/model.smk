# The performance model's plan-only study: measure this machine, partition and plan the
# study's graphs at every P (no training), predict on every machine profile, and check
# the model against measured exchanges here.


ruleorder: local_machine > machine_profile


rule bench_comm:
    output:
        f"{RESULTS}/model/bench/comm-P{{P}}.json",
    params:
        code=source_hash("bench_comm"),
    threads: lambda wildcards: int(wildcards.P) * EXECUTION["threads_per_rank"]
    resources:
        mpi=EXECUTION["mpi"],
        tasks=lambda wildcards: int(wildcards.P),
        nodes=nodes_for,
        cpus_per_task=EXECUTION["threads_per_rank"],
        runtime=EXECUTION["runtime_minutes"],
        mem_mb=memory_per_node,
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/model/bench_comm/P{P}.log",
    shell:
        "{resources.mpi} -n {resources.tasks} python -m supergcn.cli bench comm --json {output:q} > {log:q} 2>&1"


rule local_machine:
    input:
        comm=expand(f"{RESULTS}/model/bench/comm-P{{P}}.json", P=MODEL["local"]["process_counts"]),
        graph=f"{DATA}/graphs/{MODEL['local']['dataset']}",
    output:
        f"{RESULTS}/model/machines/local.json",
    params:
        hidden=TRAINING["hidden"],
        threads=EXECUTION["threads_per_rank"],
        code=source_hash("local_machine"),
    # Asks for as many cores as the largest measured MPI job, so that locally nothing
    # else runs beside the single-rank benchmarks.
    threads: max(MODEL["local"]["process_counts"]) * EXECUTION["threads_per_rank"]
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/model/machines/local.log",
    shell:
        "python -m supergcn.cli model profile --name local --comm {input.comm:q} --graph {input.graph:q} "
        "--features {params.hidden} --threads {params.threads} --out {output:q} > {log:q} 2>&1"


rule machine_profile:
    output:
        f"{RESULTS}/model/machines/{{machine}}.json",
    params:
        entry=lambda wildcards: json.dumps(config["machines"][wildcards.machine]),
        code=source_hash("model"),
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/model/machines/{machine}.log",
    shell:
        "python -m supergcn.cli model profile --name {wildcards.machine} --entry {params.entry:q} "
        "--out {output:q} > {log:q} 2>&1"


rule bench_exchange:
    input:
        plan=f"{DATA}/plans/{{dataset}}/P{{P}}/{{strategy}}",
    output:
        f"{RESULTS}/model/bench/{{dataset}}/P{{P}}/{{strategy}}-{{precision}}.json",
    params:
        bits=lambda wildcards: precision_bits(wildcards.precision),
        hidden=TRAINING["hidden"],
        parameter_dtype=TRAINING["parameter_dtype"],
        code=source_hash("bench_exchange"),
    threads: lambda wildcards: int(wildcards.P) * EXECUTION["threads_per_rank"]
    resources:
        mpi=EXECUTION["mpi"],
        tasks=lambda wildcards: int(wildcards.P),
        nodes=nodes_for,
        cpus_per_task=EXECUTION["threads_per_rank"],
        runtime=EXECUTION["runtime_minutes"],
        mem_mb=memory_per_node,
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/model/bench_exchange/{dataset}/P{P}/{strategy}-{precision}.log",
    shell:
        "{resources.mpi} -n {resources.tasks} python -m supergcn.cli bench exchange --plan {input.plan:q} "
        "--features {params.hidden} --bits {params.bits} --parameter-dtype {params.parameter_dtype} "
        "--threads {resources.cpus_per_task} --json {output:q} > {log:q} 2>&1"


rule predict:
    input:
        graph=f"{DATA}/graphs/{{dataset}}",
        partition=f"{DATA}/partitions/{{dataset}}/P{{P}}",
        plan=f"{DATA}/plans/{{dataset}}/P{{P}}/hybrid",
        machines=machine_profiles(),
    output:
        f"{RESULTS}/model/predictions/{{dataset}}/P{{P}}.json",
    params:
        hidden=TRAINING["hidden"],
        num_layers=TRAINING["num_layers"],
        bits=" ".join(str(bits) for bits in MODEL["bits"]),
        parameter_dtype=TRAINING["parameter_dtype"],
        code=source_hash("model"),
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/model/predict/{dataset}/P{P}.log",
    shell:
        "python -m supergcn.cli model predict --graph {input.graph:q} --partition {input.partition:q} "
        "--plan {input.plan:q} --machine {input.machines:q} --hidden {params.hidden} "
        "--num-layers {params.num_layers} --bits {params.bits} --parameter-dtype {params.parameter_dtype} "
        "--out {output:q} > {log:q} 2>&1"


rule model_tables:
    input:
        predictions=model_predictions(),
        validation=[result for _, _, result in model_validation()],
        profile=f"{RESULTS}/model/machines/local.json",
    output:
        expand(f"{RESULTS}/model/tables/{{table}}.{{ext}}", table=MODEL_TABLES, ext=["csv", "md", "tex"]),
    params:
        validation=" ".join(shlex.quote("=".join(item)) for item in model_validation()),
        code=source_hash("model"),
        out_dir=lambda wildcards, output: os.path.dirname(output[0]),
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/model/tables.log",
    shell:
        "python -m supergcn.cli model tables --predictions {input.predictions:q} --validation {params.validation} "
        "--profile {input.profile:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule model_figures:
    input:
        expand(f"{RESULTS}/model/tables/{{table}}.csv", table=MODEL_TABLES),
    output:
        scaling=report(
            f"{RESULTS}/model/figures/model_comm_scaling.png",
            caption="../report/model_comm_scaling.rst",
            category="Performance model",
        ),
        cost=report(
            f"{RESULTS}/model/figures/model_cost.png", caption="../report/model_cost.rst", category="Performance model"
        ),
        pdf=expand(f"{RESULTS}/model/figures/{{figure}}.pdf", figure=["model_comm_scaling", "model_cost"]),
    params:
        tables=lambda wildcards, input: os.path.dirname(input[0]),
        code=source_hash("model"),
        out_dir=lambda wildcards, output: os.path.dirname(output.scaling),
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/model/figures.log",
    shell:
        "python -m supergcn.cli model figures --tables-dir {params.tables:q} --out-dir {params.out_dir:q} "
        "> {log:q} 2>&1"


rule model_study:
    input:
        rules.model_tables.output,
        rules.model_figures.output,
