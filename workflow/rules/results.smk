# Result tables and figures of the study. Both are light single-process steps: they run
# where Snakemake runs, not as scheduler jobs.


localrules:
    tables,
    figures,


rule tables:
    input:
        runs=all_run_files(),
        plans=[plan for _, plan in volume_plans()],
        **preprocessing_dirs(),
    output:
        # The CSV files also go into `snakemake --report` (rendered as tables there).
        csv=[
            report(f"{RESULTS}/tables/{table}.csv", caption="../report/tables.rst", category="Tables",
                   labels={"table": table})
            for table in TABLES
        ],
        other=expand(f"{RESULTS}/tables/{{table}}.{{ext}}", table=TABLES, ext=["md", "tex"]),
    params:
        plans=" ".join(shlex.quote(f"{dataset}={plan}") for dataset, plan in volume_plans()),
        hidden=TRAINING["hidden"],
        hidden_by_dataset=" ".join(f"{dataset}={training_for(dataset)['hidden']}" for dataset in config["datasets"]),
        baseline=speedup_baseline_flag(),
        targets=accuracy_target_flags(),
        code=code("tables"),
        out_dir=lambda wildcards, output: os.path.dirname(output.csv[0]),
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/tables.log",
    shell:
        "python -m supergcn.cli tables --runs {input.runs:q} --plans {params.plans} --hidden {params.hidden} "
        "--hidden-by-dataset {params.hidden_by_dataset} "
        "{params.baseline} {params.targets} --graphs {input.graphs:q} --partitions {input.partitions:q} "
        "--plan-dirs {input.plan_dirs:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule figures:
    input:
        # What `supergcn figures` reads: the tables the figures are drawn from, and every
        # run's metrics file (the accuracy curves read the runs the runs table names).
        tables=[f"{RESULTS}/tables/{table}.csv" for table in dict.fromkeys(f.table for f in FIGURES.values())],
        runs=all_run_files(),
    output:
        png=[
            report(f"{RESULTS}/figures/{name}.png", caption=f"../report/{name}.rst", category=figure.section)
            for name, figure in FIGURES.items()
        ],
        pdf=expand(f"{RESULTS}/figures/{{figure}}.pdf", figure=list(FIGURES)),
    params:
        code=code("figures"),
        out_dir=lambda wildcards, output: os.path.dirname(output.png[0]),
    conda:
        "../envs/supergcn.yaml"
    log:
        f"{RESULTS}/logs/figures.log",
    shell:
        "python -m supergcn.cli figures --tables {input.tables:q} --runs {input.runs:q} --out-dir {params.out_dir:q} "
        "> {log:q} 2>&1"
