from dataclasses import replace

import numpy as np
import pytest

from supergcn.errors import SuperGCNError
from supergcn.models import card
from supergcn.naming import GNN_MODELS
from supergcn.perf import prediction as perfmodel
from supergcn.perf.prediction import MachineProfile
from supergcn.perf.traffic import epoch_traffic
from supergcn.testing.ops import StandInOps


def epoch_exchange_widths(in_dim, hidden, out_dim, num_layers, input_requires_grad=False, model="sage",
                          aggregate_first=False, heads=1):
    """(forward, backward) widths of an epoch's data exchanges, layer by layer, by the model's card."""
    layers = card(model).exchanges(in_dim, hidden, out_dim, num_layers, heads, aggregate_first, input_requires_grad)
    return [layer.width for layer in layers], [layer.width for layer in layers if layer.backward]

# Round numbers so the hand-worked figures below are easy to follow.
MACHINE = MachineProfile(name="test", latency_s=1e-3, bandwidth_bytes_per_s=1e6, quantization_bytes_per_s=2e6,
                         aggregation_bytes_per_s=4e6)


def test_fp32_exchange_time_by_hand():
    # Rank 0 sends 10 rows to rank 1; rank 1 sends 6 + 6 rows; rank 2 nothing. Width 4:
    # rank 1 moves 12 * 4 * 4 = 192 B -> 192 us at 1 MB/s, plus 2 peers x 1 ms latency.
    rows = np.array([[0, 10, 0], [6, 0, 6], [0, 0, 0]])
    prediction = perfmodel.exchange_time(rows, width=4, bits=32, machine=MACHINE)
    assert prediction.bottleneck_rank == 1
    assert prediction.data_bytes == 192 and prediction.param_bytes == 0
    assert prediction.transfer_seconds == pytest.approx(192e-6)
    assert prediction.latency_seconds == pytest.approx(2e-3)
    assert prediction.quantization_seconds == 0
    assert prediction.seconds == pytest.approx(2.192e-3)
    assert prediction.latency_bound


def test_int2_exchange_time_by_hand():
    # Rank 1 sends 5 rows to rank 0 and 3 rows to rank 2, width 8. Int2 packs 4 rows per
    # byte per destination: ceil(5/4) + ceil(3/4) = 3 byte rows of 8 = 24 B of data;
    # parameters 8 rows x 2 x 2 B = 32 B. Quantizing and dequantizing move (4 + 1/4) B per
    # value. Every rank waits for the slowest quantizer, rank 1 with 8 rows:
    # 10 us + 8 x 8 x 4.25 B / 2 MB/s = 146 us. Then, per rank, two calls of 100 us + 2 peers
    # x 1 ms, its transfer and its dequantization (5 us + received values x 4.25 B / 4 MB/s):
    #   rank 0: 16 B (1 byte row + 2 parameter rows) -> 16 + 4200 + 5 + 42.5 = 4263.5 us,
    #   rank 1: 56 B, receives 2 rows -> 56 + 4200 + 5 + 17 = 4278 us (the bottleneck),
    #   rank 2: nothing to send, receives 3 rows -> 4200 + 5 + 25.5 = 4230.5 us.
    machine = replace(MACHINE, call_s=100e-6, quantize_call_s=10e-6, dequantization_bytes_per_s=4e6,
                      dequantize_call_s=5e-6)
    rows = np.array([[0, 2, 0], [5, 0, 3], [0, 0, 0]])
    prediction = perfmodel.exchange_time(rows, width=8, bits=2, machine=machine)
    assert prediction.bottleneck_rank == 1
    assert prediction.data_bytes == 24 and prediction.param_bytes == 32
    assert prediction.transfer_seconds == pytest.approx(56e-6)
    assert prediction.latency_seconds == pytest.approx(2 * (100e-6 + 2 * 1e-3))  # data and parameters: two calls
    assert prediction.quantization_seconds == pytest.approx(146e-6 + 22e-6)
    assert prediction.seconds == pytest.approx(146e-6 + 4278e-6)


def test_bfloat16_exchange_time_by_hand():
    # The fp32 case's rows as bfloat16, width 4: rank 0 sends 10 rows, rank 1 6 + 6, 2 B a
    # value, one message a peer, no parameters. Converting moves 4 + 2 B a value, with no
    # fixed cost: the slowest converter, rank 1 with 48 values, takes 48 x 6 B / 2 MB/s =
    # 144 us before anyone receives. Then each rank pays 100 us + 2 peers x 1 ms, its
    # transfer and the conversion of what it receives (MACHINE's dequantization is its
    # quantization, 2 MB/s):
    #   rank 0: 80 B out, 6 rows in (72 us): 2100 + 80 + 72 = 2252 us,
    #   rank 1: 96 B out, 10 rows in (120 us): 2100 + 96 + 120 = 2316 us (the bottleneck),
    #   rank 2: nothing out, 6 rows in: 2100 + 72 = 2172 us.
    machine = replace(MACHINE, call_s=100e-6, quantize_call_s=10e-6, dequantize_call_s=5e-6)
    rows = np.array([[0, 10, 0], [6, 0, 6], [0, 0, 0]])
    prediction = perfmodel.exchange_time(rows, width=4, bits=16, machine=machine)
    assert prediction.data_bytes == 96 and prediction.param_bytes == 0
    assert prediction.bottleneck_rank == 1
    assert prediction.latency_seconds == pytest.approx(100e-6 + 2e-3), "one message, as float32's"
    assert prediction.transfer_seconds == pytest.approx(96e-6)
    assert prediction.quantization_seconds == pytest.approx(144e-6 + 120e-6)
    assert prediction.seconds == pytest.approx(144e-6 + 2316e-6)
    fp32 = perfmodel.exchange_time(rows, width=4, bits=32, machine=machine)
    assert 2 * prediction.data_bytes == fp32.data_bytes


def test_the_slowest_quantizer_holds_every_rank_up():
    # Rank 0 quantizes 1,000 rows for rank 1, which sends nothing back: rank 1's exchange
    # ends after rank 0's quantization, its transfer and rank 1's dequantization.
    rows = np.array([[0, 1000], [0, 0]])
    machine = replace(MACHINE, latency_s=1e-12)
    prediction = perfmodel.exchange_time(rows, width=1, bits=8, machine=machine)
    quantize = 1000 * 5 / 2e6
    rank_0 = (1000 * 1 + 1000 * 4) / 1e6  # data and bfloat16 parameters
    rank_1 = 1000 * 5 / 2e6
    assert prediction.bottleneck_rank == 0  # its transfer outweighs rank 1's dequantization
    assert prediction.seconds == pytest.approx(quantize + rank_0 + 2 * 1e-12)
    assert rank_0 > rank_1


def paper_times(comm_values, num_ranks, bits, machine):
    """Eqs. 2 and 4-6 as printed, for a rank that sends ``comm_values`` values to each of
    its P - 1 peers and receives as many from each (a quantization and a dequantization
    per pair), parameters as two FP32 values per row of width 256."""
    bw = machine.bandwidth_bytes_per_s * 8  # bits per second
    th = machine.quantization_bytes_per_s * 8
    peers = num_ranks - 1
    t_fp32 = peers * (comm_values * 32 / bw + machine.latency_s)
    params = 2 * comm_values / 256  # two per row at width 256
    t_quant = peers * (2 * comm_values * (32 + bits) / th
                       + (comm_values * bits + params * 32) / bw + machine.latency_s)
    return t_fp32, t_quant


@pytest.mark.parametrize("latency", [1e-7, 1e-4, 1e-1])
def test_eq8_matches_the_paper_equations(latency):
    """Eq. 8's closed form equals T_comm / T_quant_comm of Eqs. 2 and 4-6 for uniform,
    symmetric traffic (each rank sends and receives the same rows to every peer)."""
    machine = MachineProfile(name="m", latency_s=latency, bandwidth_bytes_per_s=1e9, quantization_bytes_per_s=5e10,
                             aggregation_bytes_per_s=1e10)
    num_ranks, rows_per_peer, width = 4, 1000, 256
    rows = np.full((num_ranks, num_ranks), rows_per_peer) - np.eye(num_ranks, dtype=int) * rows_per_peer
    ratios = perfmodel.paper_ratios(rows, width, 2, machine)
    t_fp32, t_quant = paper_times(rows_per_peer * width, num_ranks, 2, machine)
    assert ratios["alpha"] == 128 and ratios["gamma"] == 16
    assert ratios["beta"] == pytest.approx(50)
    assert ratios["speedup_eq8"] == pytest.approx(t_fp32 / t_quant, rel=1e-12)


def test_eq8_limits():
    """Throughput-bound (delta -> 0) with free quantization, Eq. 8 tends to
    alpha gamma / (alpha + gamma), gamma less the parameters' share; latency-bound
    (delta -> inf) it tends to 1 (the paper's Fig. 7)."""
    rows = np.array([[0, 10**6], [10**6, 0]])
    fast = MachineProfile(name="f", latency_s=1e-12, bandwidth_bytes_per_s=1e9, quantization_bytes_per_s=1e15,
                          aggregation_bytes_per_s=1e9)
    slow = MachineProfile(name="s", latency_s=1e3, bandwidth_bytes_per_s=1e9, quantization_bytes_per_s=1e15,
                          aggregation_bytes_per_s=1e9)
    assert perfmodel.paper_ratios(rows, 256, 2, fast)["speedup_eq8"] == pytest.approx(128 * 16 / (128 + 16), rel=1e-3)
    assert perfmodel.paper_ratios(rows, 256, 2, slow)["speedup_eq8"] == pytest.approx(1, rel=1e-3)
    full = perfmodel.exchange_time(rows, 256, 32, fast).seconds / perfmodel.exchange_time(rows, 256, 2, fast).seconds
    # Our wire adds bfloat16 parameters (4 B per row against 64 B of Int2 data): 16 x 64 / 68.
    assert full == pytest.approx(16 * 64 / 68, rel=1e-3)


def test_profile_from_config_units_and_errors():
    profile = MachineProfile.from_config("c", {"latency_us": 2, "bandwidth_gb_per_s": 10, "quantization_gb_per_s": 20,
                                               "aggregation_gb_per_s": 30, "sources": {},
                                               "by_num_ranks": {"4": {"latency_us": 9, "bandwidth_gb_per_s": 1,
                                                                      "quantize_call_us": 5}}})
    assert profile.latency_s == pytest.approx(2e-6) and profile.bandwidth_bytes_per_s == pytest.approx(1e10)
    # Optional entries: no call costs, dequantization as fast as quantization.
    assert profile.call_s == profile.quantize_call_s == profile.dequantize_call_s == 0
    assert profile.dequantization_bytes_per_s == profile.quantization_bytes_per_s == pytest.approx(2e10)
    at_4 = profile.at(4)
    assert at_4.latency_s == pytest.approx(9e-6) and at_4.bandwidth_bytes_per_s == 1e9
    assert at_4.quantize_call_s == pytest.approx(5e-6) and at_4.quantization_bytes_per_s == pytest.approx(2e10)
    assert profile.at(8) is profile
    assert MachineProfile.from_config("c", profile.to_config()) == profile
    measured = MachineProfile.from_config("m", {**profile.to_config(), "call_us": 30, "dequantization_gb_per_s": 60,
                                                "dequantize_call_us": 0})
    assert measured.call_s == pytest.approx(30e-6) and measured.dequantization_bytes_per_s == pytest.approx(6e10)
    assert MachineProfile.from_config("m", measured.to_config()) == measured
    with pytest.raises(SuperGCNError, match="lacks bandwidth_gb_per_s"):
        MachineProfile.from_config("c", {"latency_us": 2, "quantization_gb_per_s": 1, "aggregation_gb_per_s": 1})
    with pytest.raises(SuperGCNError, match="latency_us must be positive"):
        MachineProfile.from_config("c", {"latency_us": 0, "bandwidth_gb_per_s": 1, "quantization_gb_per_s": 1,
                                         "aggregation_gb_per_s": 1})
    with pytest.raises(SuperGCNError, match="call_us must be positive .the call costs: not negative"):
        MachineProfile.from_config("c", {**measured.to_config(), "call_us": -1})
    with pytest.raises(SuperGCNError, match="at P = 4 has unknown entries latency"):
        MachineProfile.from_config("c", {**measured.to_config(), "by_num_ranks": {"4": {"latency": 1}}})


@pytest.mark.parametrize("dims, requires_grad, expected", [
    # in 16 -> hidden 8 -> 8 -> out 4: layer 1 transforms first (8 < 16), so it exchanges
    # 8-wide rows and needs their gradient; the last layer exchanges 4-wide rows.
    ((16, 8, 4), False, ([8, 8, 4], [8, 8, 4])),
    # in 4 -> hidden 8: layer 1 aggregates the fixed input first; no gradient unless the
    # input needs one (label propagation, input LayerNorm).
    ((4, 8, 2), False, ([4, 8, 2], [8, 2])),
    ((4, 8, 2), True, ([4, 8, 2], [4, 8, 2])),
])
def test_epoch_exchange_widths_follow_the_model(dims, requires_grad, expected):
    assert epoch_exchange_widths(*dims, num_layers=3, input_requires_grad=requires_grad) == expected


class RecordingOps(StandInOps):
    """What a layer asks of its ops, on one rank with no edges, recording the width of every
    aggregated row forward and backward."""

    def __init__(self, n):
        super().__init__(n)
        self.seen = {"forward": [], "backward": []}

    def aggregate(self, x):
        import torch

        seen = self.seen

        class Recorder(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                seen["forward"].append(x[0].numel())
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                seen["backward"].append(grad[0].numel())
                return grad
        return Recorder.apply(x)

    def sum(self, x, row_scale=None):
        return self.aggregate(x)  # the width is what counts, not the scale

    def cached(self, state):
        from supergcn.models.gat.layer import ATTENTION

        if state is ATTENTION:  # GAT's aggregation: record its projected rows, all heads
            return lambda z, source, destination, *options: self.aggregate(z)
        return super().cached(state)


@pytest.mark.parametrize("model", GNN_MODELS)
@pytest.mark.parametrize("dims", [(16, 8, 4), (4, 8, 2), (8, 8, 8)])
@pytest.mark.parametrize("aggregate_first", [False, True])
def test_epoch_widths_match_what_training_exchanges(model, dims, aggregate_first):
    """Count the widths that really pass through the aggregation in a forward and backward
    pass of supergcn.train.gnn.GNN, for every model: each layer's width rule (GCN projects
    first also where its output is as wide as its input), ``aggregate_first`` where it
    applies."""
    import torch

    from supergcn.models.ops import Ops
    from supergcn.train.gnn import GNN

    in_dim, hidden, out_dim = dims
    ops = RecordingOps(5)
    assert isinstance(ops, Ops)  # every member a layer may ask for
    gnn = GNN(model, in_dim, hidden, out_dim, num_layers=3, heads=2, aggregate_first=aggregate_first)
    gnn(torch.randn(5, in_dim), ops).sum().backward()
    forward, backward = epoch_exchange_widths(in_dim, hidden, out_dim, 3, model=model,
                                              aggregate_first=aggregate_first, heads=2)
    assert ops.seen["forward"] == forward
    assert sorted(ops.seen["backward"]) == sorted(backward)


def sage_epoch(rows, edges, in_dim=16, hidden=8, out_dim=4, bits=32):
    traffic = epoch_traffic("sage", rows, np.zeros_like(rows), in_dim, hidden, out_dim, 3, bits)
    return perfmodel.epoch_seconds(traffic, edges, np.ones_like(edges), MACHINE)


def test_epoch_prediction_sends_gradients_back_the_other_way():
    # Rank 0 sends 4 rows to rank 1 forward; backward rank 1 sends the 4 gradient rows back.
    rows = np.array([[0, 4], [0, 0]])
    edges = np.array([100, 50])
    epoch = sage_epoch(rows, edges)
    forward, backward = epoch_exchange_widths(16, 8, 4, 3)
    assert epoch["aggregation"] == pytest.approx(sum(100 * w * 4 / 4e6 for w in forward + backward))
    assert epoch["exchange"] == pytest.approx(sum(4 * w * 4 / 1e6 + 1e-3 for w in forward + backward))
    assert epoch["bytes"] == epoch["data_bytes"] == sum(4 * w * 4 for w in forward + backward)
    assert epoch["attention_bytes"] == 0
    # Ranks 0 and 2 each send 40 rows to rank 1; backward rank 1 sends 80 rows back.
    converging = np.array([[0, 40, 0], [0, 0, 0], [0, 40, 0]])
    epoch = sage_epoch(converging, np.array([1, 1, 1]))
    expected = (sum(40 * w * 4 / 1e6 + 2e-3 for w in forward) + sum(80 * w * 4 / 1e6 + 2e-3 for w in backward))
    assert epoch["exchange"] == pytest.approx(expected)


def test_a_sage_rows_kind_does_not_change_its_epoch():
    """SAGE sends a PRE and a POST row alike: only their sum matters."""
    pre, post = np.array([[0, 3], [1, 0]]), np.array([[0, 2], [5, 0]])
    split = epoch_traffic("sage", pre, post, 16, 8, 4, 3, 2)
    whole = epoch_traffic("sage", pre + post, np.zeros_like(pre), 16, 8, 4, 3, 2)
    assert perfmodel.epoch_seconds(split, [9, 9], [1, 1], MACHINE) == perfmodel.epoch_seconds(whole, [9, 9], [1, 1],
                                                                                               MACHINE)


@pytest.mark.parametrize("bits", [32, 2])
def test_gat_epoch_bytes_are_the_row_costs_the_cover_weighs(bits):
    """GAT's epoch sends what supergcn.plan.costs prices (which a training epoch matches to
    the byte, tests/train/test_models.py): every PRE row its PRE cost, every POST row its
    POST cost. In Int2 the wire packs each peer's rows into whole bytes, so it sends at
    most a byte per column and peer more."""
    from supergcn.plan.costs import row_costs

    pre = np.array([[0, 3, 4], [0, 0, 1], [2, 0, 0]])
    post = np.array([[0, 2, 0], [7, 0, 0], [1, 1, 0]])
    heads, hidden, classes = 2, 8, 3
    traffic = epoch_traffic("gat", pre, post, 16, hidden, classes, 3, bits, heads)
    epoch = perfmodel.epoch_seconds(traffic, np.array([1, 1, 1]), np.array([1, 1, 1]), MACHINE)
    pre_bits, post_bits = row_costs(card("gat"), 3, hidden, heads, classes, bits)
    priced = (pre.sum() * pre_bits + post.sum() * post_bits) // 8
    scalars = 2 * 3 * 4 * heads * (3 * pre.sum() + post.sum())  # float32, layers x forward and backward
    assert epoch["attention_bytes"] == scalars
    if bits == 32:
        assert epoch["bytes"] == priced
    else:
        padding = 2 * sum(epoch_exchange_widths(16, hidden, classes, 3, model="gat", heads=heads)[0]) \
            * np.count_nonzero(pre + post)
        assert priced <= epoch["bytes"] <= priced + padding


def test_gat_epoch_by_hand():
    """One GAT layer at P = 2, H = 1, width 2: rank 0 sends 3 PRE and 2 POST rows to rank 1.
    Six exchanges (scores, rows, scalars; backward the three transposed), each paying a
    call's 1 ms latency; bytes at the busier rank of each."""
    pre, post = np.array([[0, 3], [0, 0]]), np.array([[0, 2], [0, 0]])
    traffic = epoch_traffic("gat", pre, post, 4, 2, 2, 1, 32, heads=1)
    assert [(step.width, step.kind) for step in traffic.exchanges] == [
        (1, "attention"), (2, "data"), (1, "attention"), (1, "attention"), (2, "data"), (1, "attention")]
    epoch = perfmodel.epoch_seconds(traffic, np.array([10, 20]), np.array([5, 6]), MACHINE)
    # scores 3 x 4 B (rank 1 -> 0), rows 5 x 2 x 4 B, scalars (2 x 3 + 2) x 4 B; then back again
    sent = [3 * 4, 5 * 8, 8 * 4, 8 * 4, 5 * 8, 3 * 4]
    assert epoch["bytes"] == sum(sent) and epoch["attention_bytes"] == 2 * (12 + 32)
    assert epoch["exchange"] == pytest.approx(sum(b / 1e6 + 1e-3 for b in sent))
    # three passes (forward; backward by destination and by source) over in-edges plus self loops
    assert epoch["aggregation"] == pytest.approx(3 * 26 * 2 * 4 / 4e6)
    # under post, the scores' exchange carries nothing but still costs its call
    only_post = epoch_traffic("gat", np.zeros_like(pre), pre + post, 4, 2, 2, 1, 32, heads=1)
    assert perfmodel.epoch_seconds(only_post, np.array([1, 1]), np.array([1, 1]), MACHINE)["exchange"] == \
        pytest.approx(6e-3 + 2 * (5 * 8 + 5 * 4) / 1e6)
