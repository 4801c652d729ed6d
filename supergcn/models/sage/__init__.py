"""GraphSAGE (Hamilton et al., NeurIPS '17), the model of upstream SuperGCN and the default.

PyG's ``SAGEConv(aggr="mean", root_weight=True)``:

    h_v = W_neigh · mean_{u in N(v)} x_u + b + W_self · x_v,

the mean over the global in-neighbours (0 for an isolated v). One row per PRE or POST row
crosses ranks each layer and direction, so the fewest rows (König's cover) are the
cheapest. The mean is the aggregation DistGNN's delayed partial aggregates are defined for
(:mod:`supergcn.methods.distgnn`). The layer: :mod:`supergcn.models.sage.layer`.
"""

from supergcn.models.card import ModelCard, narrower_output

CARD = ModelCard(name="sage", title="GraphSAGE", transforms_first=narrower_output, delayable=True,
                 trains_on_blocks=True)
