"""Per-rank communication plans: pre-, post- and hybrid aggregation (SuperGCN §5.2).

:mod:`~supergcn.plan.rank_plan` (what a rank's plan holds), :mod:`~supergcn.plan.builder`
(building every rank's plan), :mod:`~supergcn.plan.store` (the plan directory) and
:mod:`~supergcn.plan.statistics` (per pair of ranks, and in total).
"""
