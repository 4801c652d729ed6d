"""Which models weigh their covers (GAT's costs by hand: tests/models/test_gat.py; the bytes a
training epoch really sends: tests/train/test_models.py)."""

from supergcn.models import card, weighted_cover_models
from supergcn.naming import GNN_MODELS
from supergcn.plan.costs import row_costs


def test_the_models_with_a_weighted_cover_are_those_whose_rows_cost_differently():
    for model in GNN_MODELS:
        costs = row_costs(card(model), 3, 256, 4, 40)
        assert (costs is not None and costs[0] != costs[1]) == (model in weighted_cover_models())
