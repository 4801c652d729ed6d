"""Glue between Snakemake's cluster executors and batch schedulers."""
