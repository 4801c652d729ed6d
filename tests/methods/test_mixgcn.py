"""MixGCN's mixture of parallelism (supergcn.methods.mixgcn) held to its paper's formulas and
hand-worked values: the column split, the volume of a transpose (N·d − Σ n_i·c_i, constant
in P up to 1 − 1/P), the balance of the aggregation, the renumbered replicated adjacency
against scipy's, and the options it cannot run with. Its training, exact against PyG with
its bytes to the byte, is in tests/train/test_models.py."""

import numpy as np
import pytest
import scipy.sparse as sp

from supergcn.data.graph import Graph
from supergcn.kernels.ranges import even_bounds
from supergcn.methods.mixgcn.exchange import _renumbered, epoch_transpose_values, transpose_values
from supergcn.train.config import TrainConfig


def test_columns_are_split_at_floor_of_d_i_over_m():
    assert even_bounds(10, 3).tolist() == [0, 3, 6, 10]
    assert np.diff(even_bounds(256, 3)).tolist() == [85, 85, 86]
    assert np.diff(even_bounds(2, 4)).tolist() == [0, 1, 0, 1]  # more ranks than columns: some hold none


def test_a_transpose_moves_every_value_not_already_on_its_rank():
    # Rank 0 has 2 rows, rank 1 has 3; 4 columns, 2 each: rank 0 sends its 2 rows' 2 columns
    # of rank 1 (4 values), rank 1 its 3 rows' 2 columns of rank 0 (6).
    assert transpose_values([2, 3], 4) == 10
    assert transpose_values([7], 5) == 0  # one rank keeps everything


def test_an_epoch_moves_alg_2s_transposes():
    """Forward: column -> row at each of 3 layers, row -> column before layers 1 and 2;
    backward: both at layers 2 and 1. Layer 0's input needs neither its row -> column
    transpose (held in columns) nor a gradient."""
    rows, widths = [5, 4, 6], [12, 8, 8]
    t = [transpose_values(rows, w) for w in widths]
    assert epoch_transpose_values(rows, widths) == (t[0] + t[1] + t[2]) + (t[1] + t[2]) + 2 * (t[1] + t[2])


@pytest.mark.parametrize("parts", [2, 4, 8, 16])
def test_the_volume_is_constant_in_p_up_to_one_minus_one_over_p(parts):
    """MixGCN's Prop. 3.4: N·d·(1 − 1/P) exactly where P divides N and d, and within a part
    in a million of it where the row blocks are the uneven ranges floor(N·i/P)."""
    n, d = 4096, 256
    assert transpose_values([n // parts] * parts, d) == n * d * (parts - 1) // parts
    n = 1_000_003
    rows = np.diff(np.arange(parts + 1, dtype=np.int64) * n // parts)
    assert transpose_values(rows, d) == pytest.approx(n * d * (1 - 1 / parts), rel=1e-6)


@pytest.mark.parametrize("parts", [2, 3, 4, 8, 16])
def test_aggregation_work_is_balanced_within_one_column(parts):
    """Every rank aggregates nnz(Â) entries per column it holds: max / mean is 1 where P
    divides the width, and no rank holds two columns more than another."""
    columns = np.diff(even_bounds(256, parts))
    assert columns.max() - columns.min() <= 1
    if 256 % parts == 0:
        assert columns.max() / columns.mean() == 1.0


def test_the_replicated_adjacency_is_the_graph_renumbered_into_the_ranks_order():
    rng = np.random.default_rng(4)
    upper = sp.random(40, 40, density=0.1, random_state=5, format="csr")
    adjacency = ((upper + upper.T) > 0).astype(np.float32).tocsr()
    adjacency.sort_indices()
    graph = Graph("g", adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int32),
                  np.zeros((40, 1), np.float32), np.zeros(40, np.int64), *[np.zeros(40, bool)] * 3)
    order = rng.permutation(40)
    ours = _renumbered(graph, order)
    ours.sort_indices()
    expected = adjacency[order][:, order].tocsr()
    expected.sort_indices()
    assert (ours != expected).nnz == 0 and ours.nnz == adjacency.nnz


def test_mop_layers_aggregate_first_and_partition_runs_keep_their_order():
    paths = {name: "x" for name in ("graph", "partition", "plan", "out")}
    assert TrainConfig(**paths, parallelism="mop").layers_aggregate_first
    assert not TrainConfig(**paths).layers_aggregate_first
