"""GraphSAGE's card, by hand (its layer is held to PyG's SAGEConv in tests/train/test_models.py)."""

from supergcn.models import card

SAGE = card("sage")


def test_it_transforms_first_only_where_the_output_is_narrower():
    assert SAGE.layer_transforms_first(16, 8) and not SAGE.layer_transforms_first(8, 8)
    assert not SAGE.layer_transforms_first(8, 16)
    assert not SAGE.layer_transforms_first(16, 8, aggregate_first=True)


def test_its_exchanges_by_hand():
    # 16 -> 8 -> 8 -> 4: layer 1 projects first (8-wide rows, a gradient back); layer 2
    # aggregates its 8-wide input; layer 3 projects to 4.
    layers = SAGE.exchanges(16, 8, 4, 3)
    assert [(layer.width, layer.backward) for layer in layers] == [(8, True), (8, True), (4, True)]
    # 4 -> 8: layer 1 aggregates the input, which needs no gradient
    assert [(layer.width, layer.backward) for layer in SAGE.exchanges(4, 8, 2, 3)] == [(4, False), (8, True),
                                                                                      (2, True)]


def test_a_pre_and_a_post_row_cost_the_same_and_distgnn_applies():
    assert not SAGE.weighted_cover and SAGE.delayable
