# SuperGCN scaling-study pipeline. Rules live in workflow/rules/; the configuration is
# config/config.yaml (plus any --configfile overlays; every key is explained in
# config/README.md), validated against workflow/schemas/config.schema.yaml (its training
# section derived from supergcn/train/config.py) before any job runs.
from snakemake.utils import min_version

from supergcn.workflow_config import check_config, config_errors_reported

min_version("9.0")


configfile: "config/config.yaml"


# The training options the config files set, before the schema's defaults fill in the
# others: a model's own defaults replace only those (supergcn.train.config.with_model_defaults).
TRAINING_GIVEN = set(config.get("training") or {})


report: "workflow/report/workflow.rst"


# Rules run this checkout's package (also inside a --sdm conda environment). The prefix
# replaces Snakemake's default one, so it repeats its strict mode.
shell.prefix(f"set -euo pipefail; export PYTHONPATH='{workflow.basedir}'${{{{PYTHONPATH:+:$PYTHONPATH}}}}; ")


# A problem of the config (here, or found as the rules read it) is one line and status 2.
with config_errors_reported():
    # One line per problem, or the schema's defaults filled in.
    check_config(config, "workflow/schemas/config.schema.yaml")

    include: "workflow/rules/common.smk"
    include: "workflow/rules/prepare.smk"
    include: "workflow/rules/partition.smk"
    include: "workflow/rules/plan.smk"
    include: "workflow/rules/train.smk"
    include: "workflow/rules/results.smk"
    include: "workflow/rules/perf.smk"


rule all:
    input:
        rules.tables.output,
        rules.figures.output,
        rules.perf_study.input if PERF["datasets"] else [],
    default_target: True
