"""The adapter to the authors' kernel: their work split, and a clear error without it."""

import numpy as np
import pytest

from supergcn.bench.authors import load_authors_ops, row_split
from supergcn.errors import SuperGCNError


def test_row_split_is_the_authors_greedy_split():
    """distribute_work_for_row, worked by hand: 10 non-zeros, a target of 5 per thread;
    the running sum passes 5 at row 1, which starts the second range."""
    indptr = np.concatenate([[0], np.cumsum([5, 1, 1, 1, 1, 1])])
    assert row_split(indptr, 2).tolist() == [0, 1, 6]
    assert row_split(indptr, 1).tolist() == [0, 6]
    assert row_split(indptr, 2).dtype == np.int32


def test_a_folder_without_the_built_module_is_refused(tmp_path):
    with pytest.raises(SuperGCNError, match="no supergnn_ops.*so in") as error:
        load_authors_ops(tmp_path)
    assert "build_ext --inplace" in str(error.value)
