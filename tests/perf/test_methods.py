"""BNS-GCN's, PipeGCN's and SAR's epochs (supergcn.perf.methods) against hand-worked figures
on a hand-made plan of three ranks."""

from dataclasses import replace

import numpy as np
import pytest

from supergcn.bench.fits import fit_dense
from supergcn.perf import methods
from supergcn.perf.prediction import ExchangeLoad, MachineProfile, epoch_loads
from supergcn.perf.traffic import epoch_traffic

# POST[i][j]: the rows rank i sends rank j; C[i][j]: the cut edges from i's sources into j.
POST = np.array([[0, 25, 4], [10, 0, 0], [7, 3, 0]])
CUT = np.array([[0, 50, 8], [20, 0, 0], [14, 6, 0]])
EDGES = np.array([100, 70, 80])
NODES = np.array([10, 5, 8])
# 6 input features, hidden 5, 2 classes, 3 layers: layers 1 and 2 exchange 5-wide rows.
LAYERS = methods.Layers(in_features=6, hidden=5, out_features=2, num_layers=3)
MACHINE = MachineProfile(name="test", latency_s=1e-3, bandwidth_bytes_per_s=1e6, quantization_bytes_per_s=2e6,
                         aggregation_bytes_per_s=4e6)


def bns(rate):
    return next(epoch for epoch in methods.method_epochs({"hybrid": (0 * POST, POST), "post": (0 * POST, POST)},
                                                         CUT, EDGES, LAYERS, [rate])
                if epoch.method == methods.sampled_method("bns", rate))


def by_hand_bns_bytes(rate, widths=(5, 5)):
    """Σ_ij 8 k_ij + Σ_layers 2 Σ_ij k_ij W 4, with k_ij = int(p · POST[i][j]) in Python."""
    sampled = sum(int(rate * int(n)) for n in POST.flat)
    return 8 * sampled + sum(2 * sampled * width * 4 for width in widths)


@pytest.mark.parametrize("rate, expected", [(0.1, 264), (0.5, 2024), (1.0, 4312)])
def test_bns_bytes_by_hand(rate, expected):
    # p = 0.1: k = 2 (of 25) + 1 (of 10) = 3 rows -> 3 x 8 B of ids + 4 exchanges x 3 x 5 x 4 B;
    # p = 0.5: 12 + 2 + 5 + 3 + 1 = 23 rows; p = 1: all 49.
    assert by_hand_bns_bytes(rate) == expected
    epoch = bns(rate)
    assert epoch.bytes == expected
    assert epoch.calls == 5  # the ids, then layers 1 and 2 forward and backward


def test_sampled_rows_truncate_as_python_does():
    # 0.1 x 3 = 0.30000000000000004 and 0.1 x 10 = 1.0 in floats
    assert methods.sampled_rows(POST, 0.1).tolist() == [[int(0.1 * n) for n in row] for row in POST.tolist()]
    with pytest.raises(ValueError, match="0 to 1"):
        methods.sampled_rows(POST, 1.5)


def test_bns_at_rate_0_sends_nothing_and_reads_its_own_edges():
    epoch = bns(0.0)
    assert epoch.bytes == 0 and epoch.calls == 0 and epoch.loads == []
    assert methods.method_seconds(epoch, NODES, LAYERS, MACHINE)["exchange"] == 0
    # rank j reads its local in-edges only: 100 - 34, 70 - 56, 80 - 8; 2 x (5 + 5) values each
    assert epoch.values_read.tolist() == [66 * 20, 14 * 20, 72 * 20]


def test_bns_at_rate_1_is_the_post_exchange_less_layer_0_plus_the_ids():
    # The synchronous post exchange of an aggregate-first SAGE, every layer (its own epoch traffic):
    traffic = epoch_traffic("sage", 0 * POST, POST, 6, 5, 2, 3, bits=32, aggregate_first=True)
    loads = epoch_loads(traffic)
    assert traffic.exchanges[0].width == 6  # layer 0's forward exchange of the input features, and no backward one
    post_less_layer_0 = sum(load.total_bytes for load in loads[1:])
    assert post_less_layer_0 == 4 * 49 * 5 * 4
    assert bns(1.0).bytes == post_less_layer_0 + 8 * POST.sum()


def test_pipegcn_and_vanilla_send_the_post_exchange_less_layer_0():
    epochs = {epoch.method: epoch for epoch in methods.method_epochs(
        {"hybrid": (0 * POST, POST), "post": (0 * POST, POST)}, CUT, EDGES, LAYERS, [])}
    traffic = epoch_traffic("sage", 0 * POST, POST, 6, 5, 2, 3, bits=32, aggregate_first=True)
    less_layer_0 = epoch_loads(traffic)[1:]
    for method in (methods.VANILLA, "pipegcn"):
        assert epochs[method].bytes == sum(load.total_bytes for load in less_layer_0)
        assert epochs[method].calls == len(less_layer_0) == 4
        # and the same per rank: forward POST, backward POST^T
        assert [load.data_bytes.tolist() for load in epochs[method].loads] == [
            load.data_bytes.tolist() for load in less_layer_0]
    assert epochs["pipegcn"].pipelined and not epochs[methods.VANILLA].pipelined


def test_bns_reads_the_sampled_share_of_each_senders_cut_edges():
    # p = 0.5, k = [[0, 12, 2], [5, 0, 0], [3, 1, 0]]:
    #   rank 0: 100 - (20 + 14) + 20 x 5/10 + 14 x 3/7 = 82
    #   rank 1: 70 - (50 + 6) + 50 x 12/25 + 6 x 1/3 = 40
    #   rank 2: 80 - 8 + 8 x 2/4 = 76
    sampled = methods.sampled_rows(POST, 0.5)
    assert methods.sampled_edges(EDGES, CUT, POST, sampled) == pytest.approx([82, 40, 76])


def test_pipegcn_hides_its_exchange_behind_the_compute_by_hand():
    # Exchanges: forward POST, rank 0 sends 29 rows x 5 x 4 B = 580 us + 2 peers x 1 ms;
    # backward POST^T, rank 1 sends 28 rows -> 560 us + 2 ms; twice each: 10.28 ms.
    # Aggregation: rank 0 reads 100 edges x 2 x (5 + 5) values x 4 B / 4 MB/s = 2 ms.
    # Dense: 660 flops per node (4·6·5·2 + 4·5·5·3 + 4·5·2·3); rank 0's 10 nodes at 1 MFLOP/s
    # = 6.6 ms, plus 16 GEMMs x 10 us: compute 8.76 ms (rank 2: 1.6 + 5.28 + 0.16 = 7.04 ms).
    machine = replace(MACHINE, dense_flops_per_s=1e6, dense_call_s=1e-5)
    epochs = {epoch.method: epoch for epoch in methods.method_epochs(
        {"hybrid": (0 * POST, POST), "post": (0 * POST, POST)}, CUT, EDGES, LAYERS, [])}
    vanilla = methods.method_seconds(epochs[methods.VANILLA], NODES, LAYERS, machine)
    pipegcn = methods.method_seconds(epochs["pipegcn"], NODES, LAYERS, machine)
    assert LAYERS.dense_flops_per_node() == 660 and LAYERS.dense_calls == 16
    assert vanilla["exchange"] == pytest.approx(pipegcn["exchange"]) == pytest.approx(10.28e-3)
    assert pipegcn["aggregation"] == pytest.approx(2e-3) and pipegcn["dense"] == pytest.approx(6.76e-3)
    assert pipegcn["compute"] == pytest.approx(8.76e-3)
    assert vanilla["total"] == pytest.approx(19.04e-3)
    assert pipegcn["total"] == pytest.approx(10.28e-3)  # the exchange, the compute hidden behind it
    # ten times slower GEMMs: now the compute (68.16 ms) hides the exchange
    slow = methods.method_seconds(epochs["pipegcn"], NODES, LAYERS, replace(machine, dense_flops_per_s=1e5))
    assert slow["total"] == pytest.approx(2e-3 + 66e-3 + 0.16e-3)


@pytest.mark.parametrize("dense", [None, 1e5, 1e9])
def test_pipegcn_is_the_larger_of_compute_and_exchange_and_never_slower_than_sync(dense):
    machine = replace(MACHINE, dense_flops_per_s=dense)
    epochs = {epoch.method: epoch for epoch in methods.method_epochs(
        {"hybrid": (0 * POST, POST), "post": (0 * POST, POST)}, CUT, EDGES, LAYERS, [])}
    sync = methods.method_seconds(epochs[methods.VANILLA], NODES, LAYERS, machine)
    pipelined = methods.method_seconds(epochs["pipegcn"], NODES, LAYERS, machine)
    assert pipelined["total"] == max(pipelined["compute"], pipelined["exchange"])
    assert sync["total"] == pytest.approx(sync["compute"] + sync["exchange"])
    assert pipelined["total"] <= sync["total"]
    assert np.isnan(pipelined["dense"]) == (dense is None)


def test_supergcn_rows_are_the_perf_predictions_epochs():
    pre = np.array([[0, 3, 1], [2, 0, 0], [1, 1, 0]])
    epochs = {epoch.method: epoch for epoch in methods.method_epochs(
        {"hybrid": (pre, POST // 2), "post": (0 * POST, POST)}, CUT, EDGES, LAYERS, [])}
    hybrid = epoch_traffic("sage", pre, POST // 2, 6, 5, 2, 3, bits=2)
    assert epochs[methods.HYBRID_INT2].bytes == sum(load.total_bytes for load in epoch_loads(hybrid))
    assert epochs[methods.HYBRID_INT2].calls == 2 * len(hybrid.exchanges)  # data and parameters
    # SuperGCN's SAGE transforms first where it narrows (6 -> 5, 5 -> 2; those layers exchange
    # backward too, for their weights' gradients): its post FP32 is not the methods' exchange
    post = epoch_traffic("sage", 0 * POST, POST, 6, 5, 2, 3, bits=32)
    assert [step.width for step in post.exchanges] == [5, 5, 2, 2, 5, 5]
    assert epochs[methods.POST_FP32].bytes == 49 * 4 * (5 + 5 + 2 + 2 + 5 + 5)


def test_id_load_is_eight_bytes_per_id():
    load = methods.id_load(POST)
    assert load.data_bytes.tolist() == [8 * 29, 8 * 10, 8 * 10] and load.total_bytes == 8 * 49
    assert isinstance(load, ExchangeLoad) and load.bits == 32


def test_dense_fit_recovers_call_cost_and_throughput():
    sweep = [{"flops": flops, "seconds": 2e-6 + flops / 5e10} for flops in (1e5, 1e6, 1e7, 1e8)]
    fit = fit_dense(sweep)
    assert fit["dense_call_s"] == pytest.approx(2e-6, rel=1e-6)
    assert fit["dense_flops_per_s"] == pytest.approx(5e10, rel=1e-6)


def test_profile_keeps_its_dense_terms_through_the_config():
    measured = replace(MACHINE, dense_flops_per_s=4e10, dense_call_s=3e-6)
    entry = measured.to_config()
    assert entry["dense_gflop_per_s"] == pytest.approx(40) and entry["dense_call_us"] == pytest.approx(3)
    assert MachineProfile.from_config("test", entry) == measured
    assert "dense_gflop_per_s" not in MACHINE.to_config()
    assert MachineProfile.from_config("test", MACHINE.to_config()).dense_flops_per_s is None


def test_sar_sends_its_one_shot_widths_in_pairwise_steps_and_holds_the_largest_peers_rows():
    """P = 3, SAGE 6 -> 5 -> 5 -> 2 with nothing precomputed: layers 0 and 2 narrow, so they
    project first, and the layers exchange 5, 5 and 2 wide rows forward and all three back
    (layer 0's for its weight gradient). Forward step k = 1: rank i sends POST[i][i+1] =
    25, 0, 7 rows and receives POST[i-1][i] = 7, 25, 0; k = 2: 4, 10, 3 sent, 10, 3, 4
    received; backward, step k sends back the gradients of what came from i - k (7, 25, 0
    rows at k = 1) and receives those of its rows to i + k. Each step is a two-rank
    exchange: g + alpha (here alpha, g = 0) and its slowest rank's bytes over beta. Rank 1
    receives 25 + 3 rows at once one-shot, 25 at most from one peer; rank 0 17, rank 2 4."""
    epochs = {epoch.method: epoch for epoch in methods.method_epochs(
        {"hybrid": (0 * POST, POST), "post": (0 * POST, POST)}, CUT, EDGES, LAYERS, [])}
    sar, vanilla = epochs["sar"], epochs[methods.VANILLA]
    assert sar.bytes == POST.sum() * 4 * (5 + 5 + 2) * 2 and vanilla.bytes == POST.sum() * 4 * (5 + 5) * 2
    assert sar.calls == 2 * 3 * (3 - 1) == 3 * vanilla.calls
    assert [load.data_bytes.tolist() for load in sar.loads[:2]] == [[25 * 20, 0, 7 * 20], [4 * 20, 10 * 20, 3 * 20]]
    assert [load.values_received.tolist() for load in sar.loads[:2]] == [[7 * 5, 25 * 5, 0], [10 * 5, 3 * 5, 4 * 5]]
    assert [load.data_bytes.tolist() for load in sar.loads[4:6]] == [[25 * 8, 0, 7 * 8], [4 * 8, 10 * 8, 3 * 8]]
    assert [load.data_bytes.tolist() for load in sar.loads[6:8]] == [[7 * 8, 25 * 8, 0], [10 * 8, 3 * 8, 4 * 8]]
    assert sar.memory_bytes == 25 * 5 * 4 and vanilla.memory_bytes == 28 * 5 * 4
    seconds = methods.method_seconds(sar, NODES, LAYERS, MACHINE)["exchange"]
    # per 5-wide layer and pass (4 of them): step 1's slowest sends 500 B, step 2's 200 B, two
    # latencies; the 2-wide layer's two passes: 200 B and 80 B
    assert seconds == pytest.approx(4 * (2 * 1e-3 + (500 + 200) / 1e6) + 2 * (2 * 1e-3 + (200 + 80) / 1e6))
    # vanilla: one Alltoallv per layer and pass, (P - 1) alpha; forward rank 0 sends the most (29 rows),
    # backward rank 1 (28)
    assert methods.method_seconds(vanilla, NODES, LAYERS, MACHINE)["exchange"] == pytest.approx(
        2 * (2 * 1e-3 + 29 * 20 / 1e6) + 2 * (2 * 1e-3 + 28 * 20 / 1e6))
