# Result tables.


rule volume_table:
    input:
        lambda wildcards: plan_dirs(wildcards.dataset),
    output:
        f"{RESULTS}/volume/{{dataset}}.csv",
    log:
        "logs/results/volume/{dataset}.log",
    shell:
        "supergcn volume {input:q} --csv {output:q} > {log:q} 2>&1"


rule volume_summary:
    input:
        expand(f"{RESULTS}/volume/{{dataset}}.csv", dataset=config["datasets"]),
    output:
        f"{RESULTS}/volume.md",
    log:
        "logs/results/volume_summary.log",
    script:
        "../scripts/volume_summary.py"
