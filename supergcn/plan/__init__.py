"""Per-rank communication plans: pre-, post- and hybrid aggregation (SuperGCN §5.2), the
vertex covers that split each pair's cut edges, what a row costs, and the plan directory.
The API reference lists the modules."""
