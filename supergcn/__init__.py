"""SuperGCN in Python: distributed full-batch GNN training on CPU clusters.

The package follows the pipeline of SuperGCN (ICS '25): prepare a graph, partition it
with METIS, build per-rank communication plans (pre-, post- or hybrid aggregation chosen
by a minimum vertex cover), then train with one MPI rank per partition.
"""

__version__ = "0.1.0"

# The modules a user imports, the command line's plumbing aside (tests/test_public_api.py checks their docstrings).
PUBLIC_MODULES = (
    "supergcn.errors",
    "supergcn.options",
    "supergcn.progress",
    "supergcn.data.graph",
    "supergcn.data.csr",
    "supergcn.data.datasets",
    "supergcn.data.datasets.own_arrays",
    "supergcn.data.own_files",
    "supergcn.data.storage",
    "supergcn.data.digests",
    "supergcn.partition.config",
    "supergcn.partition.partition",
    "supergcn.partition.store",
    "supergcn.partition.metis",
    "supergcn.partition.kaminpar",
    "supergcn.partition.rcm",
    "supergcn.plan.rank_plan",
    "supergcn.plan.builder",
    "supergcn.plan.store",
    "supergcn.plan.statistics",
    "supergcn.train.config",
    "supergcn.train.trainer",
    "supergcn.train.metrics",
    "supergcn.train.gnn",
    "supergcn.models",
    "supergcn.models.card",
    "supergcn.models.layers",
    "supergcn.distributed.graph_ops",
    "supergcn.kernels.gather",
    "supergcn.kernels.ordered",
    "supergcn.kernels.quantization",
    "supergcn.perf.prediction",
    "supergcn.bench.kernels",
    "supergcn.report.tables",
    "supergcn.report.figures",
)
