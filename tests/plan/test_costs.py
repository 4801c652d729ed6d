"""What a PRE and a POST row cost, against hand-worked figures (the bytes a training epoch
really sends are checked in tests/train/test_models.py)."""

from supergcn.models import card, weighted_cover_models
from supergcn.naming import GNN_MODELS
from supergcn.plan.costs import row_costs


def test_gat_row_costs_by_hand():
    # 3 layers, hidden 256 in 4 heads, 40 classes: rows of 256, 256 and 4 x 40 = 160 values.
    assert [layer.width for layer in card("gat").exchanges(100, 256, 40, 3, heads=4)] == [256, 256, 160]
    data = 2 * 32 * (256 + 256 + 160)   # float32, forward and backward
    scalars = 2 * 4 * 32 * 3            # H float32 per row, layer and direction
    assert row_costs("gat", 3, 256, 4, 40) == (data + 3 * scalars, data + scalars)
    # Int2 with bfloat16 parameters: 2 bits a value and two 16-bit parameters a row.
    data = 2 * ((256 + 256 + 160) * 2 + 3 * 2 * 16)
    assert row_costs("gat", 3, 256, 4, 40, bits=2) == (data + 3 * scalars, data + scalars)


def test_the_models_with_a_weighted_cover_are_those_whose_rows_cost_differently():
    for model in GNN_MODELS:
        costs = row_costs(model, 3, 256, 4, 40)
        assert (costs is not None and costs[0] != costs[1]) == (model in weighted_cover_models())
