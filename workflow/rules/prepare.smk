# Dataset download or generation. A local rule: login nodes reach the internet, compute
# nodes often do not.


localrules:
    prepare,


rule prepare:
    output:
        directory(f"{DATA}/graphs/{{dataset}}"),
    params:
        code=code("prepare"),
        raw_root=config["raw_root"],
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
        "python -m supergcn.cli prepare {wildcards.dataset} --raw-root {params.raw_root:q} --seed {params.seed} "
        "--self-loops {params.self_loops} {params.nonfinite} --out {output:q} > {log:q} 2>&1"
