"""Partitioning: METIS parts, minimum vertex covers and the per-rank communication plans."""
