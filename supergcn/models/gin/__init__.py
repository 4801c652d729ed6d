"""GIN (Xu et al., ICLR '19): PyG's ``GINConv`` with ``train_eps`` and a two-layer MLP.

    h_v = W_2 · ReLU(W_1 · ((1 + eps) x_v + sum_{u in N(v)} x_u) + b_1) + b_2,

``eps`` learned from 0. One row per PRE or POST row crosses ranks, as GraphSAGE's do; the
layer (:mod:`supergcn.models.gin.layer`) projects by ``W_1`` first where its output is
narrower (the sum is linear).

At the shared learning rate of 0.01, GIN (ours and PyG's alike) predicts one class on Cora
and CiteSeer: the unnormalised sum makes its activations grow with the degree. It learns at
0.001, its own default (``training_defaults``), used unless the user sets ``lr``.
"""

from supergcn.models.card import ModelCard, narrower_output

CARD = ModelCard(name="gin", title="GIN", transforms_first=narrower_output, training_defaults={"lr": 0.001})
