# Result tables and figures of the study. Both are light single-process steps: they run
# where Snakemake runs, not as scheduler jobs.


localrules:
    tables,
    figures,


TABLES = ["runs", "scaling", "breakdown", "accuracy", "time_to_accuracy", "volume", "preprocessing"]
FIGURES = ["scaling", "breakdown", "accuracy_curves", "volume"]


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
        "logs/results/tables.log",
    shell:
        "python -m supergcn.cli tables --runs {input.runs:q} --plans {params.plans} --hidden {params.hidden} "
        "--hidden-by-dataset {params.hidden_by_dataset} "
        "{params.baseline} {params.targets} --graphs {input.graphs:q} --partitions {input.partitions:q} "
        "--plan-dirs {input.plan_dirs:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule figures:
    input:
        tables=expand(f"{RESULTS}/tables/{{table}}.csv", table=TABLES),
        runs=all_run_files(),  # the accuracy curves read every run's epochs
    output:
        scaling=report(f"{RESULTS}/figures/scaling.png", caption="../report/scaling.rst", category="Scaling"),
        breakdown=report(
            f"{RESULTS}/figures/breakdown.png", caption="../report/breakdown.rst", category="Scaling"
        ),
        accuracy=report(
            f"{RESULTS}/figures/accuracy_curves.png", caption="../report/accuracy.rst", category="Accuracy"
        ),
        volume=report(
            f"{RESULTS}/figures/volume.png", caption="../report/volume.rst", category="Communication"
        ),
        pdf=expand(f"{RESULTS}/figures/{{figure}}.pdf", figure=FIGURES),
    params:
        tables=lambda wildcards, input: os.path.dirname(input.tables[0]),
        code=code("figures"),
        out_dir=lambda wildcards, output: os.path.dirname(output.scaling),
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/results/figures.log",
    shell:
        "python -m supergcn.cli figures --tables-dir {params.tables:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"

