# METIS partition of a prepared graph into P parts.


rule partition:
    input:
        f"{DATA}/graphs/{{dataset}}",
    output:
        directory(f"{DATA}/partitions/{{dataset}}/P{{P}}"),
    params:
        code=code("partition"),
        constraints=" ".join(config["partition"]["constraints"]),
        seed=config["partition"]["seed"],
    # In the rule, not the profile's default-resources, which --default-resources replaces whole.
    resources:
        runtime=EXECUTION["runtime_minutes"],
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/partition/{dataset}/P{P}.log",
    shell:
        "python -m supergcn.cli partition --graph {input:q} --parts {wildcards.P} --constraints {params.constraints} "
        "--seed {params.seed} --out {output:q} > {log:q} 2>&1"
