# Dataset download or generation, or a graph of your own read from its NumPy files. A local
# rule: login nodes reach the internet, compute nodes often do not.
from supergcn.data.own_files import GraphFiles
from supergcn.options import command_line


localrules:
    prepare,


def own_files(wildcards):
    """The files of `wildcards.dataset` if the config declares it under own_datasets (`~`
    expanded), by role; else none. They are the job's inputs: a changed file prepares it again."""
    entry = config.get("own_datasets", {}).get(wildcards.dataset, {})
    return {role: os.path.expanduser(path) for role, path in entry.items() if path is not None}


def prepare_source(wildcards, input):
    """What `supergcn prepare` reads: the built-in dataset of that name (from raw_root), or
    your own graph's files."""
    if not input.keys():
        return f"{shlex.quote(wildcards.dataset)} --raw-root {shlex.quote(config['raw_root'])}"
    files = command_line(GraphFiles, {role: input[role] for role in input.keys()})
    return shlex.join(["--name", wildcards.dataset, *files])


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
