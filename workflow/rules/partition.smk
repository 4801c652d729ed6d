# METIS, KaMinPar or reverse Cuthill–McKee (rcm) partition of a prepared graph into P parts.
import shlex

from supergcn.options import command_line
from supergcn.partition.config import PartitionConfig


rule partition:
    input:
        f"{DATA}/graphs/{{dataset}}",
    output:
        directory(f"{DATA}/partitions/{{dataset}}/P{{P}}"),
    params:
        code=code("partition"),
        # The config's partition options as the command's flags (supergcn/partition/config.py),
        # but the threads: the job's own, which the scheduler grants.
        options=shlex.join(
            command_line(PartitionConfig, {key: value for key, value in config["partition"].items() if key != "threads"})
        ),
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
        "python -m supergcn.cli partition --graph {input:q} --parts {wildcards.P} {params.options} --threads {threads} "
        "--out {output:q} > {log:q} 2>&1"
