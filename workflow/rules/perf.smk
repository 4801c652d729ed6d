# The performance model's plan-only study: measure this machine, partition and plan the
# study's graphs at every P (no training), predict on every machine profile, and check
# the model against measured exchanges here.


ruleorder: local_machine > machine_profile


# Light single-process steps run where Snakemake runs, not as scheduler jobs.
localrules:
    machine_profile,
    predict,
    perf_tables,
    perf_figures,


rule bench_comm:
    input:
        plans=expand(f"{DATA}/plans/{PERF['local']['dataset']}/P{{{{P}}}}/{{strategy}}", strategy=STRATEGIES),
    output:
        f"{RESULTS}/perf/bench/comm-P{{P}}.json",
    params:
        hidden=training_for(PERF["local"]["dataset"])["hidden"],
        # the quantized width the model is checked at (its cost per value hardly depends on it)
        bits=min([bits for bits in PERF["local"]["bits"] if bits in QUANTIZED_BITS], default=2),
        exchanges=lambda wildcards, input: " ".join(
            shlex.quote(f"{strategy}={plan}") for strategy, plan in zip(STRATEGIES, input.plans)
        ),
        exchange_bits=" ".join(str(bits) for bits in PERF["local"]["bits"]),
        rounds=PERF["local"]["rounds"],
        parameter_dtype=TRAINING["parameter_dtype"],
        code=code("bench_comm"),
    threads: lambda wildcards: int(wildcards.P) * EXECUTION["threads_per_rank"]
    resources:
        **RANK_JOB,
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/perf/bench_comm/P{{P}}.log",
    shell:
        "{resources.launch} python -m supergcn.cli bench comm --features {params.hidden} --bits {params.bits} "
        "--parameter-dtype {params.parameter_dtype} --threads {resources.cpus_per_task} "
        "--exchange {params.exchanges} --exchange-bits {params.exchange_bits} --rounds {params.rounds} "
        "--json {output:q} > {log:q} 2>&1"


rule local_machine:
    input:
        comm=perf_validation(),
        graph=f"{DATA}/graphs/{PERF['local']['dataset']}",
    output:
        f"{RESULTS}/perf/machines/local.json",
    params:
        hidden=training_for(PERF["local"]["dataset"])["hidden"],
        threads=EXECUTION["threads_per_rank"],
        code=code("perf_profile"),
    # Locally, as many cores as the largest measured MPI job, so that nothing else runs
    # beside the single-rank benchmarks. On a cluster (perf.local.within_cores off) it is a
    # job of its own, and asks for the threads it runs (a scheduler would otherwise be asked
    # for every rank's cores of that MPI job).
    threads: (max(MEASURED_COUNTS) if PERF["local"].get("within_cores", True) else 1) * EXECUTION["threads_per_rank"]
    resources:
        runtime=EXECUTION["runtime_minutes"],
        cpus_per_task=EXECUTION["threads_per_rank"],
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/perf/machines/local.log",
    shell:
        "python -m supergcn.cli perf profile --name local --comm {input.comm:q} --graph {input.graph:q} "
        "--features {params.hidden} --threads {params.threads} --out {output:q} > {log:q} 2>&1"


rule machine_profile:
    output:
        f"{RESULTS}/perf/machines/{{machine}}.json",
    params:
        entry=lambda wildcards: json.dumps(config["machines"][wildcards.machine]),
        code=code("perf_profile"),
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/perf/machines/{{machine}}.log",
    shell:
        "python -m supergcn.cli perf profile --name {wildcards.machine} --entry {params.entry:q} "
        "--out {output:q} > {log:q} 2>&1"


rule predict:
    input:
        graph=f"{DATA}/graphs/{{dataset}}",
        partition=f"{DATA}/partitions/{{dataset}}/P{{P}}",
        plan=lambda wildcards: plan_dir(wildcards.dataset, wildcards.P, "hybrid", wildcards.gnn),
        machines=machine_profiles(),
    output:
        f"{RESULTS}/perf/predictions/{{dataset}}/{{gnn}}/P{{P}}.json",
    params:
        hidden=lambda wildcards: training_for(wildcards.dataset)["hidden"],
        heads=lambda wildcards: training_for(wildcards.dataset)["heads"],
        num_layers=TRAINING["num_layers"],
        bits=" ".join(str(bits) for bits in PERF["bits"]),
        parameter_dtype=TRAINING["parameter_dtype"],
        aggregate_first=lambda wildcards: "--aggregate-first" if training_for(wildcards.dataset)["aggregate_first"]
        else "",
        code=code("perf_predict"),
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/perf/predict/{{dataset}}/{{gnn}}/P{{P}}.log",
    shell:
        "python -m supergcn.cli perf predict --graph {input.graph:q} --partition {input.partition:q} "
        "--plan {input.plan:q} --machine {input.machines:q} --model {wildcards.gnn} --hidden {params.hidden} "
        "--heads {params.heads} --num-layers {params.num_layers} --bits {params.bits} "
        "--parameter-dtype {params.parameter_dtype} {params.aggregate_first} --out {output:q} > {log:q} 2>&1"


rule perf_tables:
    input:
        predictions=perf_predictions(),
        validation=perf_validation(),
        profile=f"{RESULTS}/perf/machines/local.json",
    output:
        csv=[
            report(f"{RESULTS}/perf/tables/{table}.csv", caption="../report/tables.rst",
                   category="Performance model", subcategory="Tables", labels={"table": table})
            for table in PERF_TABLES
        ],
        other=expand(f"{RESULTS}/perf/tables/{{table}}.{{ext}}", table=PERF_TABLES, ext=["md", "tex"]),
    params:
        code=code("perf_tables"),
        out_dir=lambda wildcards, output: os.path.dirname(output.csv[0]),
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/perf/tables.log",
    shell:
        "python -m supergcn.cli perf tables --predictions {input.predictions:q} --validation {input.validation:q} "
        "--profile {input.profile:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule perf_figures:
    input:
        expand(f"{RESULTS}/perf/tables/{{table}}.csv", table=PERF_TABLES),
    output:
        png=[
            report(f"{RESULTS}/perf/figures/{figure}.png", caption=f"../report/{figure}.rst",
                   category="Performance model", subcategory="Figures")
            for figure in PERF_FIGURES
        ],
        pdf=expand(f"{RESULTS}/perf/figures/{{figure}}.pdf", figure=PERF_FIGURES),
    params:
        tables=lambda wildcards, input: os.path.dirname(input[0]),
        code=code("perf_figures"),
        out_dir=lambda wildcards, output: os.path.dirname(output.png[0]),
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/perf/figures.log",
    shell:
        "python -m supergcn.cli perf figures --tables-dir {params.tables:q} --out-dir {params.out_dir:q} "
        "> {log:q} 2>&1"


rule perf_study:
    input:
        rules.perf_tables.output,
        rules.perf_figures.output,
