# Communication plan of one partition under one strategy.


rule plan:
    input:
        graph=f"{DATA}/graphs/{{dataset}}",
        partition=f"{DATA}/partitions/{{dataset}}/P{{P}}",
    output:
        directory(f"{DATA}/plans/{{dataset}}/P{{P}}/{{strategy}}"),
    params:
        code=code("plan"),
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
        "--strategy {wildcards.strategy} --out {output:q} > {log:q} 2>&1"


# The hybrid plan of a model whose PRE rows cost more than its POST rows (GAT): its cover
# is a cheapest one under the model's row costs, not the one of the fewest rows.
rule plan_weighted:
    input:
        graph=f"{DATA}/graphs/{{dataset}}",
        partition=f"{DATA}/partitions/{{dataset}}/P{{P}}",
    output:
        directory(f"{DATA}/plans/{{dataset}}/P{{P}}/hybrid-{{model}}"),
    params:
        code=code("plan"),
        cover=cover_options,
    resources:
        runtime=EXECUTION["runtime_minutes"],
        mem_mb=plan_mem_mb,
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/plan/{dataset}/P{P}/hybrid-{model}.log",
    benchmark:
        "logs/benchmarks/plan/{dataset}/P{P}/hybrid-{model}.tsv"
    shell:
        "python -m supergcn.cli plan --graph {input.graph:q} --partition {input.partition:q} "
        "--strategy hybrid {params.cover} --out {output:q} > {log:q} 2>&1"
