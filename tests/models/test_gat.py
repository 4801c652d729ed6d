"""GAT's card, by hand (its layer is held to PyG's GATConv and its bytes to these costs in
tests/train/test_models.py)."""

from supergcn.models import card
from supergcn.plan.costs import row_costs
from supergcn.train.config import TrainConfig

GAT = card("gat")


def test_it_always_projects_first_and_exchanges_all_heads():
    # 3 layers, hidden 256 in 4 heads, 40 classes: rows of 256, 256 and 4 x 40 = 160 values.
    for aggregate_first in (False, True):
        layers = GAT.exchanges(100, 256, 40, 3, heads=4, aggregate_first=aggregate_first)
        assert [(layer.width, layer.backward) for layer in layers] == [(256, True), (256, True), (160, True)]


def test_row_costs_by_hand():
    data = 2 * 32 * (256 + 256 + 160)   # float32, forward and backward
    scalars = 2 * 4 * 32 * 3            # H float32 per row, layer and direction
    assert row_costs(card("gat"), 3, 256, 4, 40) == (data + 3 * scalars, data + scalars)
    # Int2 with bfloat16 parameters: 2 bits a value and two 16-bit parameters a row.
    data = 2 * ((256 + 256 + 160) * 2 + 3 * 2 * 16)
    assert row_costs(card("gat"), 3, 256, 4, 40, bits=2) == (data + 3 * scalars, data + scalars)
    assert GAT.weighted_cover


def test_heads_must_divide_the_hidden_width():
    config = TrainConfig(graph="g", partition="p", plan="q", out="o", model="gat", hidden=30, heads=4)
    assert any("GAT's 4 heads are concatenated into the hidden width 30" in problem for problem in config.conflicts())
    assert not TrainConfig(graph="g", partition="p", plan="q", out="o", model="gat", hidden=32,
                           heads=4).conflicts()
    # a model without heads reads neither option
    assert not TrainConfig(graph="g", partition="p", plan="q", out="o", model="sage", hidden=30,
                           heads=4).conflicts()
