# SuperGCN scaling-study pipeline. Rules live in workflow/rules/; the configuration is
# config/config.yaml, validated against workflow/schemas/config.schema.yaml.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/partition.smk"
include: "workflow/rules/plan.smk"
include: "workflow/rules/results.smk"


rule all:
    input:
        volume_tables(),
    default_target: True
