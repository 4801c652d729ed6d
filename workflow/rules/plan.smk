# Communication plan of one partition under one strategy.


rule plan:
    input:
        graph=f"{DATA}/graphs/{{dataset}}",
        partition=f"{DATA}/partitions/{{dataset}}/P{{P}}",
    output:
        directory(f"{DATA}/plans/{{dataset}}/P{{P}}/{{strategy}}"),
    params:
        code=code("plan"),
        cover=cover_options,
    # In the rule, not the profile's default-resources, which --default-resources replaces whole.
    resources:
        runtime=EXECUTION["runtime_minutes"],
        mem_mb=plan_mem_mb,
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/plan/{dataset}/P{P}/{strategy}.log",
    benchmark:
        "logs/benchmarks/plan/{dataset}/P{P}/{strategy}.tsv"
    shell:
        "python -m supergcn.cli plan --graph {input.graph:q} --partition {input.partition:q} "
        "--strategy {wildcards.strategy} {params.cover} --out {output:q} > {log:q} 2>&1"
