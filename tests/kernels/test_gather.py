"""Numba kernels against scipy / torch on awkward sparse matrices, and against a sum
taken entry by entry in CSR order (the kernels' results, to the last bit)."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from supergcn.kernels.gather import (
    BLOCK,
    LANES,
    GatherCsr,
    _gather_spmm,
    balanced_chunks,
    column_groups,
    index_add,
    index_add_plan,
    segments,
    sums_in,
)
from supergcn.kernels.jit import numba

#: Widths from a single lane to several blocks and a masked remainder of every kind.
WIDTHS = [1, 5, LANES, 40, 47, BLOCK, BLOCK + 37, 3 * BLOCK + LANES + 1]


def awkward_matrix(rng, rows=300, cols=250):
    """Random CSR with empty rows, one huge-degree row, and duplicate-free columns."""
    m = sp.random(rows, cols, density=0.03, random_state=rng, format="lil")
    m[7, :] = 1.0                      # a hub row touching every column
    m[10:40, :] = 0.0                  # a run of empty rows
    m = sp.csr_matrix(m)
    m.data = rng.uniform(0.5, 2.0, m.nnz)
    return m


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = numba.get_num_threads()
    numba.set_num_threads(min(request.param, numba.config.NUMBA_NUM_THREADS))
    yield request.param
    numba.set_num_threads(before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("features", WIDTHS)
@pytest.mark.parametrize("weighted", [False, True])
def test_gather_matches_scipy(threads, dtype, features, weighted):
    rng = np.random.default_rng(features)
    m = awkward_matrix(rng)
    if not weighted:
        m.data[:] = 1.0
    op = GatherCsr(m.indptr, m.indices, m.shape[1], m.data.astype(dtype) if weighted else None)
    x = rng.standard_normal((m.shape[1], features)).astype(dtype)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(op.matmul(x), m @ x, rtol=tolerance, atol=tolerance)
    # The transpose is a gather over A^T.
    y = rng.standard_normal((m.shape[0], features)).astype(dtype)
    np.testing.assert_allclose(op.transpose().matmul(y), m.T @ y, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("features", WIDTHS)
def test_scaled_accumulation(threads, features):
    """Accumulating reads every row's previous values before any other row is written: a
    masked store that wrote past its row would change the next row's starting values."""
    rng = np.random.default_rng(0)
    m = awkward_matrix(rng)
    op = GatherCsr(m.indptr, m.indices, m.shape[1], m.data)
    x = rng.standard_normal((m.shape[1], features))
    previous = rng.standard_normal((m.shape[0], features))
    scale = rng.uniform(0, 2, m.shape[0])
    out = previous.copy()
    op.matmul(x, out=out, accumulate=True, row_scale=scale)
    np.testing.assert_allclose(out, scale[:, None] * (previous + m @ x), rtol=1e-10, atol=1e-12)


def sequential_sum(m: sp.csr_matrix, x: np.ndarray, previous: np.ndarray | None = None) -> np.ndarray:
    """out[r] = previous[r] + x[c_1] + x[c_2] + ... in the row's entry order, in x's dtype."""
    out = np.zeros((m.shape[0], x.shape[1]), x.dtype) if previous is None else previous.copy()
    for r in range(m.shape[0]):
        for c in m.indices[m.indptr[r]:m.indptr[r + 1]]:
            out[r] += x[c]
    return out


@pytest.mark.parametrize("features", WIDTHS)
def test_sums_in_entry_order_to_the_last_bit(threads, features):
    """Every result is the float32 sum in the row's entry order, whatever the threads, the
    register block or the masked remainder: the pinned training results rest on it."""
    rng = np.random.default_rng(features)
    m = awkward_matrix(rng)
    op = GatherCsr(m.indptr, m.indices, m.shape[1])
    x = rng.standard_normal((m.shape[1], features)).astype(np.float32)
    previous = rng.standard_normal((m.shape[0], features)).astype(np.float32)
    np.testing.assert_array_equal(op.matmul(x), sequential_sum(m, x))
    out = previous.copy()
    op.matmul(x, out=out, accumulate=True)
    np.testing.assert_array_equal(out, sequential_sum(m, x, previous))


def bfloat16_rows(rng, shape) -> tuple[np.ndarray, np.ndarray]:
    """Random bfloat16 rows (torch's rounding of normal values, with a NaN, infinities and
    a subnormal): their bit patterns (uint16, as the kernels take them) and their float32 values."""
    values = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    values.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e-39])
    rows = values.to(torch.bfloat16)
    return rows.view(torch.int16).numpy().view(np.uint16), rows.float().numpy()


@pytest.mark.parametrize("features", WIDTHS)
@pytest.mark.parametrize("weighted", [False, True])
def test_bfloat16_rows_are_summed_as_their_float32_values_to_the_last_bit(threads, features, weighted):
    """A bfloat16 row widens to float32 exactly, so its product (plain, scaled and
    accumulated, and the transpose's) is the float32 product of the widened rows, bit for
    bit: the same order, the same roundings, half the bytes read."""
    rng = np.random.default_rng(features)
    m = awkward_matrix(rng)
    op = GatherCsr(m.indptr, m.indices, m.shape[1], m.data.astype(np.float32) if weighted else None)
    for product in (op, op.transpose()):
        bits, values = bfloat16_rows(rng, (product.shape[1], features))
        got = product.matmul(bits)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, product.matmul(values))
        previous = rng.standard_normal((product.shape[0], features)).astype(np.float32)
        scale = rng.uniform(0, 2, product.shape[0]).astype(np.float32)
        out, expected = previous.copy(), previous.copy()
        product.matmul(bits, out=out, accumulate=True, row_scale=scale)
        product.matmul(values, out=expected, accumulate=True, row_scale=scale)
        np.testing.assert_array_equal(out, expected)


def test_bfloat16_rows_match_a_hand_worked_sum():
    """[[1, 1, 0], [0, 2, 1]] (weights) times bfloat16 rows 1.5, 2^-8 + 1 (rounded to 1: 8
    significant bits) and -3: 1.5 + 1 = 2.5 and 2 * 1 - 3 = -1."""
    op = GatherCsr(np.array([0, 2, 4]), np.array([0, 1, 1, 2]), 3, np.array([1, 1, 2, 1], np.float32))
    rows = torch.tensor([[1.5], [1 + 2**-8], [-3.0]]).to(torch.bfloat16)
    got = op.matmul(rows.view(torch.int16).numpy().view(np.uint16))
    np.testing.assert_array_equal(got, np.array([[2.5], [-1.0]], np.float32))


def test_a_bfloat16_product_is_written_in_float32_only():
    assert sums_in(np.uint16) == np.float32 and sums_in(np.float64) == np.float64
    op = GatherCsr(np.array([0, 1]), np.array([0]), 1)
    with pytest.raises(ValueError, match="summed into float32, not float64"):
        op.matmul(np.zeros((1, 4), np.uint16), out=np.zeros((1, 4), np.float64))


def test_outputs_the_kernel_could_write_past_are_refused():
    """The kernel writes whole C-order rows unchecked: an out of other rows, a Fortran-order
    one, a read-only one, and an index_add into rows dst lacks are refused before it runs."""
    op = GatherCsr(np.array([0, 1, 2, 3]), np.array([0, 1, 2]), 3)
    x = np.ones((3, 4), np.float32)
    for out in (np.zeros((2, 4), np.float32), np.zeros((3, 5), np.float32), np.zeros((3, 4), np.float32, order="F"),
                np.zeros((3, 4), np.float32)[:, :4:1].copy()[::-1]):
        with pytest.raises(ValueError, match="out must be a writable C-contiguous 3 x 4 array"):
            op.matmul(x, out=out)
    frozen = np.zeros((3, 4), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out must be a writable"):
        op.matmul(x, out=frozen)
    with pytest.raises(ValueError, match="index holds rows outside 0..1"):
        index_add(np.zeros((2, 4), np.float32), np.array([0, 5]), x[:2])


@pytest.mark.parametrize("features", [1, 40, BLOCK, 2 * BLOCK + 3])
def test_segments_tile_the_row(features):
    rows = segments(features)
    starts, widths, used = rows.T
    assert starts[0] == 0 and np.array_equal(starts[1:], np.cumsum(widths)[:-1]), "segments follow one another"
    assert np.all(widths % LANES == 0) and np.all(widths <= BLOCK), "whole vectors, at most one block"
    assert np.all(widths[:-1] == BLOCK) and np.all(used[:-1] == LANES), "only the last segment is partial"
    assert starts[-1] + widths[-1] - LANES + used[-1] == features, "the last vector's lanes end the row"
    assert 1 <= used[-1] <= LANES


def test_segments_of_hand_worked_widths():
    assert segments(2 * BLOCK).tolist() == [[0, BLOCK, LANES], [BLOCK, BLOCK, LANES]]
    # 40 features: three vectors of 16 lanes, the last using 8 (AVX-512 or SVE-512 widths).
    assert segments(2 * LANES + LANES // 2).tolist() == [[0, 3 * LANES, LANES // 2]]
    assert segments(0).shape == (0, 3)


def test_column_groups_fill_idle_threads_and_give_the_same_product(threads):
    """A matrix of two rows and a wide input: the segments become a parallel dimension."""
    assert column_groups(num_segments=8, num_chunks=1, threads=4).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert column_groups(num_segments=8, num_chunks=64, threads=4).tolist() == [0, 8]
    m = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 1]], dtype=np.float32))
    x = np.random.default_rng(0).standard_normal((3, 8 * BLOCK + 5)).astype(np.float32)
    np.testing.assert_array_equal(GatherCsr(m.indptr, m.indices, 3).matmul(x), sequential_sum(m, x))


def test_pure_gather_reads_the_rows_of_the_product_into_one_row_per_chunk(threads):
    """The roofline's pure gather runs the same code: chunk c's row of the scratch ends
    holding the product's row of the chunk's last row."""
    rng = np.random.default_rng(4)
    m = awkward_matrix(rng)
    op = GatherCsr(m.indptr, m.indices, m.shape[1])
    x = rng.standard_normal((m.shape[1], 40)).astype(np.float32)
    chunks = op.chunks()
    scratch = np.full((len(chunks) - 1, 48), np.nan, np.float32)  # rows wider than x's: the last 8 stay
    op.pure_gather(x, scratch)
    np.testing.assert_array_equal(scratch[:, :40], op.matmul(x)[chunks[1:] - 1])
    assert np.isnan(scratch[:, 40:]).all()
    for wrong in (scratch[:-1], scratch[:, :39], scratch[:, ::2], scratch.astype(np.float64)):
        with pytest.raises(ValueError, match="one per chunk"):
            op.pure_gather(x, wrong)


def test_memory_mapped_and_in_memory_inputs_share_one_compilation(tmp_path, threads):
    """A graph read from disk (read-only arrays) and one built in memory (writable), their
    rows either way, through the product and the pure gather: numba types the two kinds of
    array apart, so without the read-only views each mix would compile on its own."""
    rng = np.random.default_rng(5)
    m = awkward_matrix(rng)
    x = rng.standard_normal((m.shape[1], 24)).astype(np.float32)
    for name, array in (("indptr", m.indptr.astype(np.int64)), ("indices", m.indices.astype(np.int64)), ("x", x)):
        np.save(tmp_path / f"{name}.npy", array)
    mapped = {name: np.load(tmp_path / f"{name}.npy", mmap_mode="r") for name in ("indptr", "indices", "x")}
    assert not any(array.flags.writeable for array in mapped.values())
    in_memory = GatherCsr(m.indptr.astype(np.int64), m.indices.astype(np.int64), m.shape[1])
    from_disk = GatherCsr(mapped["indptr"], mapped["indices"], m.shape[1])
    expected = in_memory.matmul(x)
    compiled = len(_gather_spmm.signatures)
    for op in (in_memory, from_disk):
        for rows in (x, mapped["x"]):
            np.testing.assert_array_equal(op.matmul(rows), expected)
            scratch = np.empty((len(op.chunks()) - 1, 32), np.float32)
            op.pure_gather(rows, scratch)
    assert len(_gather_spmm.signatures) == compiled


def test_index_add_matches_torch(threads):
    rng = np.random.default_rng(1)
    index = rng.integers(0, 50, 400)
    index[:30] = 3  # a heavily repeated destination
    src = rng.standard_normal((400, 33)).astype(np.float32)
    dst = rng.standard_normal((60, 33)).astype(np.float32)
    expected = torch.from_numpy(dst.copy()).index_add_(0, torch.from_numpy(index), torch.from_numpy(src)).numpy()
    plan = index_add_plan(index, 60)
    np.testing.assert_allclose(index_add(dst.copy(), index, src), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(index_add(dst.copy(), index, src, plan=plan), expected, rtol=1e-5, atol=1e-5)
    assert np.array_equal(plan.indices, np.argsort(index, kind="stable")), "src rows must not be moved"


def test_chunks_balance_work_not_rows():
    degrees = np.array([1000] + [1] * 999)
    indptr = np.concatenate([[0], np.cumsum(degrees)])
    chunks = balanced_chunks(indptr, 4)
    assert chunks[0] == 0 and chunks[-1] == 1000 and np.all(np.diff(chunks) > 0)
    work = degrees + 1
    per_chunk = np.array([work[a:b].sum() for a, b in zip(chunks[:-1], chunks[1:])])
    # No chunk exceeds its fair share by more than one row's work (a row is not split)...
    assert per_chunk.max() <= work.sum() / 4 + work.max()
    assert chunks[1] == 1, "the hub row should sit alone in its chunk"
    # ...whereas equal row counts would give the hub's chunk 249 more rows.
    equal_rows = np.array([work[a:a + 250].sum() for a in range(0, 1000, 250)])
    assert per_chunk.max() < equal_rows.max()


def test_empty_matrix_and_zero_features():
    op = GatherCsr(np.zeros(5, np.int64), np.zeros(0, np.int64), 3)
    np.testing.assert_array_equal(op.matmul(np.ones((3, 4), np.float32)), np.zeros((4, 4), np.float32))
    assert op.matmul(np.ones((3, 0), np.float32)).shape == (4, 0)


@pytest.mark.parametrize("pieces", [2, 7])
def test_pieces_give_the_same_product_and_call_between_after_each(threads, pieces):
    rng = np.random.default_rng(3)
    m = awkward_matrix(rng)
    op = GatherCsr(m.indptr, m.indices, m.shape[1], m.data)
    x = rng.standard_normal((m.shape[1], 5)).astype(np.float32)
    calls = []
    out = np.full((m.shape[0], 5), np.nan, dtype=np.float32)  # every row must be written
    op.matmul(x, out=out, pieces=pieces, between=lambda: calls.append(1))
    np.testing.assert_array_equal(out, op.matmul(x))
    assert len(calls) == pieces


@pytest.mark.parametrize("indptr, indices, message", [
    ([0, 2, 3], [0, 5, 1], "outside the 4 columns"),      # a column past the end
    ([0, 2, 3], [0, -1, 1], "outside the 4 columns"),     # a negative column
    ([0, 2, 1], [0, 1, 1], "malformed CSR row pointers"),  # decreasing row pointers
    ([0, 2, 4], [0, 1, 1], "malformed CSR row pointers"),  # more entries promised than given
])
def test_bad_csr_indices_are_refused_before_any_product(indptr, indices, message):
    """The kernel indexes without bounds checks: a bad plan must fail at construction."""
    with pytest.raises(ValueError, match=message):
        GatherCsr(np.array(indptr), np.array(indices), num_cols=4)
