# METIS or KaMinPar partition of a prepared graph into P parts.


rule partition:
    input:
        f"{DATA}/graphs/{{dataset}}",
    output:
        directory(f"{DATA}/partitions/{{dataset}}/P{{P}}"),
    params:
        code=code("partition"),
        constraints=" ".join(config["partition"]["constraints"]),
        seed=config["partition"]["seed"],
        engine=config["partition"]["engine"],
        kaminpar_preset=config["partition"]["kaminpar_preset"],
        kaminpar_large_k_preset=config["partition"]["kaminpar_large_k_preset"],
        edge_fraction=config["partition"]["edge_fraction"],
        separate={True: "--separate-constraints", False: "--no-separate-constraints", None: ""}[
            config["partition"]["separate_constraints"]
        ],
    threads: partition_threads
    # In the rule, not the profile's default-resources, which --default-resources replaces whole.
    resources:
        runtime=EXECUTION["runtime_minutes"],
        mem_mb=partition_mem_mb,
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/partition/{dataset}/P{P}.log",
    benchmark:
        "logs/benchmarks/partition/{dataset}/P{P}.tsv"
    shell:
        "python -m supergcn.cli partition --graph {input:q} --parts {wildcards.P} --constraints {params.constraints} "
        "--seed {params.seed} --engine {params.engine} --threads {threads} "
        "--kaminpar-preset {params.kaminpar_preset:q} --kaminpar-large-k-preset {params.kaminpar_large_k_preset:q} "
        "--edge-fraction {params.edge_fraction} {params.separate} --out {output:q} > {log:q} 2>&1"
