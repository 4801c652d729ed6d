# Dataset download or generation, or a graph of your own read from its NumPy files. A local
# rule: login nodes reach the internet, compute nodes often do not.


localrules:
    prepare,


rule prepare:
    input:
        unpack(own_files),
    output:
        directory(f"{DATA}/graphs/{{dataset}}"),
    params:
        code=code("prepare"),
        source=prepare_source,
        seed=config["dataset_seed"],
        self_loops=config["self_loops"],
        nonfinite="--allow-nonfinite-features" if config["allow_nonfinite_features"] else "",
    conda:
        "../envs/supergcn.yaml"
    log:
        "logs/prepare/{dataset}.log",
    benchmark:
        "logs/benchmarks/prepare/{dataset}.tsv"
    shell:
        "python -m supergcn.cli prepare {params.source} --seed {params.seed} "
        "--self-loops {params.self_loops} {params.nonfinite} --out {output:q} > {log:q} 2>&1"
