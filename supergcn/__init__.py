"""SuperGCN in Python: distributed full-batch GNN training on CPU clusters.

The package follows the pipeline of SuperGCN (ICS '25): prepare a graph, partition it
with METIS, build per-rank communication plans (pre-, post- or hybrid aggregation chosen
by a minimum vertex cover), then train with one MPI rank per partition.
"""

__version__ = "0.1.0"
