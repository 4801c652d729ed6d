# METIS partition of a prepared graph into P parts.


rule partition:
    input:
        f"{DATA}/graphs/{{dataset}}",
    output:
        directory(f"{DATA}/partitions/{{dataset}}/P{{P}}"),
    params:
        constraints=" ".join(config["partition"]["constraints"]),
        seed=config["partition"]["seed"],
    log:
        "logs/partition/{dataset}/P{P}.log",
    shell:
        "supergcn partition --graph {input:q} --parts {wildcards.P} --constraints {params.constraints} "
        "--seed {params.seed} --out {output:q} > {log:q} 2>&1"
