"""MixGCN's mixture of parallelism in the performance model (supergcn.perf.methods'
mixture_epoch) against hand-worked figures and its own volume formula
(supergcn.methods.mixgcn), and the crossover of its curves with the hybrid exchange's
(supergcn.perf.study) on hand-made series."""

import numpy as np
import pandas as pd
import pytest

from supergcn.methods import card
from supergcn.methods.mixgcn.exchange import epoch_transpose_values, transpose_values
from supergcn.perf import methods, study
from supergcn.perf.prediction import MachineProfile

# Three ranks owning 5, 3 and 4 rows (N = 12), 30 adjacency entries; GraphSAGE 4 -> 6 -> 6 -> 2:
# the transposed widths are the layers' inputs, 4, 6 and 6.
ROWS = np.array([5, 3, 4])
LAYERS = methods.Layers(in_features=4, hidden=6, out_features=2, num_layers=3)
ENTRIES = 30
#: The method whose epoch moves transposes: MixGCN's card (its row name and its memory terms).
MIXGCN = card("mixgcn")
MACHINE = MachineProfile(name="test", latency_s=1e-3, bandwidth_bytes_per_s=1e6, quantization_bytes_per_s=2e6,
                         aggregation_bytes_per_s=4e6)


def test_each_transpose_sends_by_hand():
    # d = 4 over 3 ranks: columns 1, 1, 2. Row -> column: rank i sends its rows' other
    # columns, 5 x 3, 3 x 3, 4 x 2; and receives its columns of the others' rows, 7 x 1, 9 x 1, 8 x 2.
    to_columns, to_rows = methods.transpose_loads(ROWS, 4)
    assert to_columns.values_sent.tolist() == [15, 9, 8] and to_columns.values_received.tolist() == [7, 9, 16]
    assert to_rows.values_sent.tolist() == [7, 9, 16] and to_rows.values_received.tolist() == [15, 9, 8]
    assert to_columns.data_bytes.tolist() == [60, 36, 32] and not to_columns.param_bytes.any()
    assert to_columns.total_bytes == to_rows.total_bytes == 4 * transpose_values(ROWS, 4) == 4 * 32


def test_an_epoch_by_hand():
    """Nine transposes: column -> row at layer 0; both at layers 1 and 2, forward and backward.
    d = 6: columns 2, 2, 2; rank 0 sends 5 x 4 = 20 values row -> column, rank 1 9 x 2 = 18
    column -> row; d = 4's column -> row: rank 2 sends 8 x 2 = 16.
    Exchange: 9 calls x 2 peers x 1 ms + (16 + 4 x 20 + 4 x 18) x 4 B / 1 MB/s = 18.672 ms.
    Aggregation: rank 2 reads 30 entries x (2 + 2 + 2 + 2 + 2) columns x 4 B / 4 MB/s = 0.3 ms
    (ranks 0 and 1: 30 x (1 + 8)). Memory: 8 x (12 + 1 + 30) B of adjacency + rank 2's slices,
    4 x 12 x (2 + 2 + 2) B."""
    epoch = methods.mixture_epoch(MIXGCN, ROWS, LAYERS, ENTRIES)
    assert epoch.method == "mixgcn" and epoch.calls == 9 and not epoch.pipelined
    assert epoch.bytes == 4 * (32 + 48 + 48 + 3 * (48 + 48)) == 4 * epoch_transpose_values(ROWS, [4, 6, 6])
    assert epoch.values_read.tolist() == [30 * 9, 30 * 9, 30 * 10]
    assert epoch.memory_bytes == 8 * (12 + 1 + 30) + 4 * 12 * 6
    seconds = methods.method_seconds(epoch, ROWS, LAYERS, MACHINE)
    assert seconds["exchange"] == pytest.approx(18.672e-3)
    assert seconds["aggregation"] == pytest.approx(0.3e-3)
    assert seconds["total"] == pytest.approx(18.972e-3)  # no overlap: compute + exchange


@pytest.mark.parametrize("parts, expected", [(2, 26_112), (4, 39_168), (8, 45_696), (16, 48_960)])
def test_the_bytes_are_constant_in_p_up_to_one_minus_one_over_p(parts, expected):
    """P divides N = 48 and every width (16, 32, 32): each transpose moves N d (1 - 1/P), the
    epoch N (1 - 1/P) (16 + 32 + 32 + 3 (32 + 32)) = 272 N (1 - 1/P) values of 4 B:
    4 x 48 x 272 = 52,224 B times 1/2, 3/4, 7/8, 15/16."""
    rows = np.full(parts, 48 // parts)
    epoch = methods.mixture_epoch(MIXGCN, rows, methods.Layers(16, 32, 3, 3), adjacency_entries=100)
    assert epoch.bytes == expected == 4 * epoch_transpose_values(rows, [16, 32, 32])
    assert epoch.bytes / (1 - 1 / parts) == pytest.approx(52_224)
    assert epoch.calls == 9  # every P: 1 + 4 (L - 1) all-to-all calls


COUNTS = [2, 4, 8, 16]


@pytest.mark.parametrize("reference, expected", [
    ([1, 5, 20, 40], (8, 16)),    # crosses between P = 4 and 8, and stays below
    ([1, 2, 3, 4], None),         # never crosses
    ([1, 5, 10, 40], (8, 16)),    # equal at P = 8, then below
    ([1, 10, 5, 40], (4, 4)),     # equal at P = 4 only: the run is that P
    ([1, 5, 20, 5], (8, 8)),      # below at P = 8 only: crosses back between 8 and 16
    ([11, 12, 9, 14], (2, 4)),    # below from the smallest P; the first run only
], ids=["between", "never", "equal-then-below", "equal-at-one", "for-a-while", "first-run"])
def test_the_crossover_on_hand_made_series(reference, expected):
    assert study.crossover_span(COUNTS, [10, 10, 10, 10], reference) == expected
    assert study.crossover_span(COUNTS[::-1], [10] * 4, reference[::-1]) == expected  # the order of P is no matter


def test_the_crossover_table_and_its_summary():
    """Hybrid FP32 bytes grow 100, 300, 900 and pass MixGCN's 500 between P = 4 and 8; Int2
    stays below. MixGCN's exchange (2 s) is no slower than FP32's 1, 2, 3 s from P = 4 on
    machine a, never on b (1 s); than Int2's 1, 2, 1 s on c only at P = 4. GAT's rows get
    no MixGCN crossover."""
    timings = {"a": (1.0, 2.0, 3.0), "b": (1.0, 1.0, 1.0), "c": (1.0, 2.0, 1.0)}
    predictions = pd.DataFrame.from_records([
        {"dataset": "g", "machine": machine, "model": model, "P": p, "strategy": "hybrid", "bits": bits,
         "layer_seconds": 1.0, "latency_bound": False, "epoch_bytes": volume * (1 if bits == 32 else 0.1),
         "epoch_exchange_seconds": seconds}
        for machine, timing in timings.items() for model in ("sage", "gat") for bits in (32, 2)
        for p, volume, seconds in zip((2, 4, 8), (100, 300, 900), timing)])
    compared = pd.DataFrame.from_records([
        {"dataset": "g", "P": p, "machine": machine, "method": "mixgcn", "epoch_bytes": 500,
         "epoch_exchange_seconds": 2.0} for machine in timings for p in (2, 4, 8)])
    table = study.crossover_table(predictions, compared).set_index(["machine", "model", "bits"])
    spans = ["mop_fewer_bytes_from_P", "mop_fewer_bytes_to_P", "mop_faster_exchange_from_P",
             "mop_faster_exchange_to_P"]
    assert table.loc[("a", "sage", 32), spans].tolist() == [8, 8, 4, 8]
    assert table.loc[("b", "sage", 2), spans].isna().all()
    assert table.loc[("c", "sage", 2), spans[2:]].tolist() == [4, 4]
    assert table.xs("gat", level="model")[spans].isna().all().all()
    assert study.mixture_crossover_lines(table.reset_index()) == [
        "g: MixGCN's mixture of parallelism sends no more bytes per epoch than hybrid FP32 from P = 8; hybrid Int2 "
        "at no P studied; its exchanges take no longer than hybrid FP32's a from P = 4, b at no P studied, c at P "
        "= 4 only; hybrid Int2's a from P = 4, b at no P studied, c at P = 4 only (P up to 8)"]
