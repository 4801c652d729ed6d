"""GCN's card, by hand (its layer is held to PyG's GCNConv in tests/train/test_models.py)."""

from supergcn.models import card
from supergcn.train.config import TrainConfig

GCN = card("gcn")


def test_it_projects_first_also_where_the_widths_are_equal():
    """Without a root weight, projecting first costs the same GEMM: GCN exchanges the
    projected rows unless the output is wider (SAGE's rule would aggregate 8-wide input
    first at 8 -> 8 and skip the first layer's backward exchange)."""
    assert GCN.layer_transforms_first(8, 8) and not GCN.layer_transforms_first(8, 16)
    layers = GCN.exchanges(8, 8, 4, 3)
    assert [(layer.width, layer.backward) for layer in layers] == [(8, True), (8, True), (4, True)]
    layers = GCN.exchanges(8, 8, 4, 3, aggregate_first=True)
    assert [(layer.width, layer.backward) for layer in layers] == [(8, False), (8, True), (8, True)]


def test_distgnn_is_refused_for_it():
    config = TrainConfig(graph="g", partition="p", plan="q", out="o", model="gcn", schedule="cd-2")
    assert any("needs the mean aggregation, which GCN is not — use --model sage" in problem
               for problem in config.conflicts())
    assert not GCN.weighted_cover
