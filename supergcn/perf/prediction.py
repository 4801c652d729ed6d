"""The communication performance model of SuperGCN (paper §5.4 and §6.2, Eqs. 2–8).

For P ranks, rank i sends ``Comm[i][j]`` rows of F features to rank j in every exchange
(one GNN layer's forward or backward pass). In FP32 (Eq. 2, with a per-call cost c),

    T_comm = max_i [ c + (P - 1) L + sum_{j != i} Comm[i][j] * F * 4 bytes / BW ],

with BW the bandwidth one rank gets in an all-to-all and L the cost of one message per
peer. A b-bit exchange (Eqs. 4–6) sends ceil(Comm[i][j] * b / 8) bytes per feature
column (each destination's chunk padded to whole bytes) plus two parameters per row
(zero point and scale, 2 bytes each as bfloat16). Every rank first quantizes what it
sends; the exchange then waits for the slowest of them; each rank then dequantizes what
it receives. Each moves (4 + b/8) bytes per value, at throughputs TH_q and TH_d and with
a cost per exchange a_q and a_d whatever its size:

    Q_i = a_q + F (4 + b/8) sum_j Comm[i][j] / TH_q,     D_i = a_d + F (4 + b/8) sum_j Comm[j][i] / TH_d,
    T_quant = max_i Q_i + max_i [ 2 (c + (P - 1) L) + sum_j (data_ij + params_ij) / BW + D_i ].

A bfloat16 exchange (b = 16, upstream's ``--num_bits 16``) is one message of 2 bytes a
value with no parameters; each side converts its values, reading one width and writing
the other (6 bytes a value) at the quantization and dequantization throughputs, with no
fixed cost (a conversion is one vectorised pass):

    T_bf16 = max_i 6 F sum_j Comm[i][j] / TH_q
             + max_i [ c + (P - 1) L + sum_j 2 F Comm[i][j] / BW + 6 F sum_j Comm[j][i] / TH_d ].

Departures from the paper, each because the model is checked against this
implementation (``supergcn bench exchange``, the validation table) and its terms fitted
on the machine at hand (``supergcn bench comm``, :mod:`supergcn.bench.comm`):

* c: posting and completing one Alltoallv from Python costs tens of microseconds
  whatever P, which the paper's per-peer L leaves out; where a profile is measured at one
  P only, c is folded into L there;
* quantized exchanges send data and parameters as two concurrent Alltoallv calls, each
  paying c and (P - 1) L (the paper's Eq. 5 has one);
* the paper's single TH and sum over a rank's own quantization and dequantization become
  the sender's quantization (the slowest sender holds the exchange up) and the
  receiver's dequantization, at their own throughputs (quantizing finds each row's range
  and rounds: about 3x slower per byte than dequantizing, measured) and fixed costs;
* the parameter bytes are those on our wire (bfloat16 by default, not the paper's FP32).

Every rank pays a latency for each of its P - 1 peers, as in Eq. 2 (an Alltoallv
addresses all of them), even where it sends a peer nothing. Eq. 7's ratios and Eq. 8's
predicted speedup are evaluated at the bottleneck rank, with TH the round trip's
throughput 2 / (1 / TH_q + 1 / TH_d)::

    alpha = Comm / Params (values),  beta = TH / BW,  gamma = 32 / b,
    delta = L * (P - 1) / (Comm_i * F * (b / 8) / BW),
    speedup = alpha beta (gamma + delta) / ((1 + delta) alpha beta + 2 alpha (1 + gamma) + beta gamma)
            ~ (gamma + delta) / (1 + delta).

An exchange is *latency-bound* when its latency term (calls and messages) exceeds its
transfer term (the paper's Fig. 7); Int2 reaches that point at fewer ranks than FP32.

Aggregation time per rank and layer is the rank's in-edges (local and remote) times
F * 4 bytes over the measured aggregation throughput (bytes of neighbour rows gathered
per second), so an epoch's aggregation + exchange time is predicted too, at the widths
each model exchanges (:mod:`supergcn.perf.traffic`); dense layers are left out (their
cost per rank shrinks as 1 / P).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from supergcn.errors import SuperGCNError
from supergcn.kernels.wire import BF16_BYTES, FP32_BYTES, wire_bytes
from supergcn.naming import DEFAULT_PARAMETER_DTYPE
from supergcn.perf.traffic import TRAFFIC_KINDS, EpochTraffic

#: A machine profile's entries in the config (microseconds and 1e9 bytes per second) and
#: the attribute each one sets: the first four are required, the others optional.
PROFILE_FIELDS = {"latency_us": "latency_s", "bandwidth_gb_per_s": "bandwidth_bytes_per_s",
                  "quantization_gb_per_s": "quantization_bytes_per_s",
                  "aggregation_gb_per_s": "aggregation_bytes_per_s", "call_us": "call_s",
                  "quantize_call_us": "quantize_call_s", "dequantization_gb_per_s": "dequantization_bytes_per_s",
                  "dequantize_call_us": "dequantize_call_s", "dense_gflop_per_s": "dense_flops_per_s",
                  "dense_call_us": "dense_call_s"}
PROFILE_KEYS = tuple(PROFILE_FIELDS)[:4]
_UNITS = {"_us": 1e-6, "_gb_per_s": 1e9, "_gflop_per_s": 1e9}


def _unit(key: str) -> float:
    return next(scale for suffix, scale in _UNITS.items() if key.endswith(suffix))


def _to_si(entry: dict, where: str) -> dict:
    """The profile entries in ``entry`` as attribute values (seconds, bytes per second)."""
    unknown = sorted(set(entry) - set(PROFILE_FIELDS))
    if unknown:
        raise SuperGCNError(f"{where} has unknown entries {', '.join(unknown)}",
                            f"use {', '.join(PROFILE_FIELDS)}")
    values = {key: float(value) for key, value in entry.items()}
    bad = [key for key, value in values.items() if not (value >= 0 if key.endswith("call_us") else value > 0)]
    if bad:
        raise SuperGCNError(f"{where}: {', '.join(bad)} must be positive (the call costs: not negative)",
                            "fix its entry in the config's machines section")
    return {PROFILE_FIELDS[key]: value * _unit(key) for key, value in values.items()}


@dataclass(frozen=True)
class MachineProfile:
    """What the model needs to know about a machine, per MPI rank.

    Args:
        name: the profile's name (a key of the config's ``machines``).
        latency_s: L, seconds of one message per peer in an all-to-all.
        bandwidth_bytes_per_s: BW, bytes per second one rank sends in an all-to-all.
        quantization_bytes_per_s: TH_q, bytes read and written per second quantizing rows to send.
        aggregation_bytes_per_s: neighbour-row bytes gathered per second by aggregation.
        description: what the machine is.
        sources: where each figure comes from.
        call_s: c, seconds of one all-to-all call whatever P.
        quantize_call_s: a_q, seconds of quantizing for one exchange whatever its size.
        dequantization_bytes_per_s: TH_d of dequantizing received rows (None: TH_q).
        dequantize_call_s: a_d, seconds of dequantizing for one exchange whatever its size.
        dense_flops_per_s: TH_g, float32 flops per second of the dense layers' GEMMs (None:
            not known; the dense layers are then left out, :mod:`supergcn.perf.methods`).
        dense_call_s: g, seconds of one GEMM call whatever its size.
        by_num_ranks: P -> {attribute: value} measured at P ranks, used there instead (:meth:`at`).
    """

    name: str
    latency_s: float                 # L: cost of one message per peer in an all-to-all
    bandwidth_bytes_per_s: float     # BW: bytes per second one rank sends in an all-to-all
    quantization_bytes_per_s: float  # TH: bytes read + written per second quantizing rows to send
    aggregation_bytes_per_s: float   # neighbour-row bytes gathered per second by aggregation
    description: str = ""
    sources: dict = field(default_factory=dict)
    call_s: float = 0.0              # c: cost of one all-to-all call, whatever P
    quantize_call_s: float = 0.0     # a_q: cost of quantizing for one exchange, whatever its size
    dequantization_bytes_per_s: float | None = None  # TH of dequantizing received rows (default: TH)
    dequantize_call_s: float = 0.0   # a_d
    dense_flops_per_s: float | None = None  # TH_g of the dense layers' GEMMs
    dense_call_s: float = 0.0        # g: cost of one GEMM call, whatever its size
    # Entries measured at particular process counts (attribute -> value), used there instead.
    by_num_ranks: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.dequantization_bytes_per_s is None:
            object.__setattr__(self, "dequantization_bytes_per_s", self.quantization_bytes_per_s)

    @classmethod
    def from_config(cls, name: str, entry: dict) -> MachineProfile:
        """A profile from a config entry in µs and GB/s (see config/config.yaml).

        Args:
            name: the profile's name.
            entry: its config entry (:data:`PROFILE_FIELDS`, ``description``, ``sources``,
                ``by_num_ranks``).

        Returns:
            The profile, in seconds and bytes per second.

        Raises:
            SuperGCNError: a required entry is missing, an entry is unknown, or a value is not
                positive (a call cost negative).
        """
        missing = [key for key in PROFILE_KEYS if key not in entry]
        if missing:
            raise SuperGCNError(f"machine profile {name!r} lacks {', '.join(missing)}",
                                "add them to its entry (units: *_us in microseconds, *_gb_per_s in 1e9 bytes "
                                "per second)")
        described = {"description", "sources", "by_num_ranks", "format", "name", "measurements"}
        values = _to_si({key: value for key, value in entry.items() if key not in described},
                        f"machine profile {name!r}")
        by_num_ranks = {int(p): _to_si(overrides, f"machine profile {name!r} at P = {p}")
                        for p, overrides in entry.get("by_num_ranks", {}).items()}
        return cls(name=name, description=entry.get("description", ""), sources=dict(entry.get("sources", {})),
                   by_num_ranks=by_num_ranks, **values)

    def to_config(self) -> dict:
        """The profile as a config entry, in µs and GB/s: the inverse of :meth:`from_config`.

        Returns:
            ``description``, the :data:`PROFILE_FIELDS` entries, ``sources`` and ``by_num_ranks``.
        """
        def config_entries(values: dict) -> dict:
            return {key: values[attribute] / _unit(key) for key, attribute in PROFILE_FIELDS.items()
                    if values.get(attribute) is not None}
        by_num_ranks = {str(p): config_entries(overrides) for p, overrides in sorted(self.by_num_ranks.items())}
        return {"description": self.description, **config_entries(vars(self)), "sources": self.sources,
                "by_num_ranks": by_num_ranks}

    def at(self, num_ranks: int) -> MachineProfile:
        """This profile with the entries measured at ``num_ranks`` ranks, where there are some.

        Args:
            num_ranks: the number of ranks, P.

        Returns:
            ``self``, or a copy with the entries measured at P.
        """
        if num_ranks not in self.by_num_ranks:
            return self
        return replace(self, **self.by_num_ranks[num_ranks])

    @property
    def round_trip_bytes_per_s(self) -> float:
        """Bytes per second of quantizing a value and dequantizing it again (harmonic mean)."""
        return 2 / (1 / self.quantization_bytes_per_s + 1 / self.dequantization_bytes_per_s)


@dataclass(frozen=True)
class ExchangePrediction:
    """One exchange (one layer, one direction) as the model sees it, at the bottleneck rank.

    Args:
        seconds: the exchange's predicted time.
        bottleneck_rank: the rank that finishes last.
        transfer_seconds: its bytes over the bandwidth.
        latency_seconds: its calls and per-peer message costs.
        quantization_seconds: the slowest sender's quantization plus the bottleneck rank's dequantization (0 in FP32).
        data_bytes: the data bytes it sends.
        param_bytes: the quantization parameters' bytes it sends.
    """

    seconds: float
    bottleneck_rank: int
    transfer_seconds: float
    latency_seconds: float
    quantization_seconds: float
    data_bytes: int    # sent by the bottleneck rank
    param_bytes: int

    @property
    def latency_bound(self) -> bool:
        """Whether the latency term exceeds the transfer term (module docstring)."""
        return self.latency_seconds > self.transfer_seconds


@dataclass(frozen=True)
class ExchangeLoad:
    """What one exchange moves, per rank, whatever the machine: the P x P matrix reduced
    once (a study predicts each exchange on several machines; at P = 8,192 the matrix is
    half a GiB).

    Args:
        num_ranks: the ranks each call addresses, P (2 for one step of a sequential
            exchange, in which every rank sends one peer and receives from another).
        bits: 32, or the quantized width.
        data_bytes: the data bytes each rank sends.
        param_bytes: the quantization parameters' bytes each rank sends.
        values_sent: the values (rows x width) each rank sends.
        values_received: the values each rank receives.
    """

    num_ranks: int
    bits: int
    data_bytes: np.ndarray
    param_bytes: np.ndarray
    values_sent: np.ndarray
    values_received: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray, width: int, bits: int,
           parameter_dtype: str = DEFAULT_PARAMETER_DTYPE) -> ExchangeLoad:
        """The load of ``rows[i][j]`` rows of ``width`` values from rank i to rank j.

        Args:
            rows: P x P rows.
            width: the values per row.
            bits: 32, or 8, 4 or 2.
            parameter_dtype: the wire type of the per-row parameters.

        Returns:
            The load.

        Raises:
            ValueError: ``rows`` is not square.
        """
        rows = np.asarray(rows, dtype=np.int64)
        num_ranks = rows.shape[0]
        if rows.shape != (num_ranks, num_ranks):
            raise ValueError(f"rows must be a square matrix, got shape {rows.shape}")
        data, params = wire_bytes(rows, width, bits, parameter_dtype)
        return cls(num_ranks, bits, data.sum(axis=1), params.sum(axis=1), rows.sum(axis=1) * width,
                   rows.sum(axis=0) * width)

    @property
    def total_bytes(self) -> int:
        """Bytes all ranks send."""
        return int(self.data_bytes.sum() + self.param_bytes.sum())


def exchange_time(rows: np.ndarray, width: int, bits: int, machine: MachineProfile,
                  parameter_dtype: str = DEFAULT_PARAMETER_DTYPE) -> ExchangePrediction:
    """Predicted time of one exchange of ``rows[i][j]`` rows of ``width`` features (see the
    module docstring).

    Args:
        rows: P x P rows, [i][j] the rows rank i sends rank j.
        width: F, the features per row.
        bits: 32, 16 (bfloat16), or 8, 4 or 2 for a quantized exchange.
        machine: the machine's profile, its entries at P where measured (:meth:`~MachineProfile.at`).
        parameter_dtype: the wire type of the per-row parameters.

    Returns:
        The prediction at the bottleneck rank.

    Raises:
        ValueError: ``rows`` is not square.
    """
    return load_time(ExchangeLoad.of(rows, width, bits, parameter_dtype), machine)


def load_time(load: ExchangeLoad, machine: MachineProfile) -> ExchangePrediction:
    """:func:`exchange_time` of an exchange already reduced to its :class:`ExchangeLoad`.

    Args:
        load: what the exchange moves per rank.
        machine: the machine's profile (its entries at P where measured).

    Returns:
        The prediction at the bottleneck rank.
    """
    num_ranks = load.num_ranks
    machine = machine.at(num_ranks)
    transfer = (load.data_bytes + load.param_bytes) / machine.bandwidth_bytes_per_s
    if load.bits == 32:
        messages, quantize, dequantize = 1, 0.0, np.zeros(len(load.data_bytes))
    elif load.bits == 16:  # converted each side, one message, no parameters
        converted = FP32_BYTES + BF16_BYTES
        messages = 1
        quantize = load.values_sent.max() * converted / machine.quantization_bytes_per_s
        dequantize = load.values_received * converted / machine.dequantization_bytes_per_s
    else:
        messages = 2
        bytes_per_value = FP32_BYTES + load.bits / 8
        quantize = (machine.quantize_call_s
                    + load.values_sent.max() * bytes_per_value / machine.quantization_bytes_per_s)
        dequantize = (machine.dequantize_call_s
                      + load.values_received * bytes_per_value / machine.dequantization_bytes_per_s)
    latency = messages * (machine.call_s + (num_ranks - 1) * machine.latency_s)
    after_quantization = transfer + latency + dequantize
    rank = int(np.argmax(after_quantization))
    return ExchangePrediction(seconds=float(quantize + after_quantization[rank]), bottleneck_rank=rank,
                              transfer_seconds=float(transfer[rank]), latency_seconds=float(latency),
                              quantization_seconds=float(quantize + dequantize[rank]),
                              data_bytes=int(load.data_bytes[rank]), param_bytes=int(load.param_bytes[rank]))


def paper_ratios(rows: np.ndarray, width: int, bits: int, machine: MachineProfile) -> dict[str, float]:
    """Eq. 7's alpha, beta, gamma, delta at the FP32 bottleneck rank and Eq. 8's speedup
    (exact and the paper's approximation). Parameters counted as the paper does: two
    values per row.

    Args:
        rows: P x P rows, [i][j] the rows rank i sends rank j.
        width: the features of a row, F.
        bits: the quantized width b.
        machine: the machine's profile.

    Returns:
        ``alpha``, ``beta``, ``gamma``, ``delta``, ``speedup_eq8`` and
        ``speedup_eq8_approx`` (1 where the rank sends nothing).
    """
    rows = np.asarray(rows, dtype=np.int64)
    num_ranks = rows.shape[0]
    machine = machine.at(num_ranks)
    sent = rows.sum(axis=1)
    rank = int(np.argmax(sent))
    alpha = width / 2
    beta = machine.round_trip_bytes_per_s / machine.bandwidth_bytes_per_s
    gamma = 32 / bits
    quantized_seconds = sent[rank] * width * bits / 8 / machine.bandwidth_bytes_per_s
    delta = (num_ranks - 1) * machine.latency_s / quantized_seconds if quantized_seconds else float("inf")
    if np.isinf(delta):
        exact = approximate = 1.0
    else:
        exact = alpha * beta * (gamma + delta) / ((1 + delta) * alpha * beta + 2 * alpha * (1 + gamma) + beta * gamma)
        approximate = (gamma + delta) / (1 + delta)
    return {"alpha": alpha, "beta": beta, "gamma": gamma, "delta": float(delta),
            "speedup_eq8": float(exact), "speedup_eq8_approx": float(approximate)}


def aggregation_seconds(edges_per_rank: np.ndarray, width: int, machine: MachineProfile) -> float:
    """The slowest rank's aggregation time for one layer: in-edges x width x 4 bytes gathered.

    Args:
        edges_per_rank: in-edges (local and remote) of each rank.
        width: the features of a row, F.
        machine: the machine's profile.

    Returns:
        Seconds.
    """
    edges = np.asarray(edges_per_rank, dtype=np.float64)
    return float(edges.max() * width * FP32_BYTES / machine.aggregation_bytes_per_s)


def epoch_loads(traffic: EpochTraffic, parameter_dtype: str = DEFAULT_PARAMETER_DTYPE) -> list[ExchangeLoad]:
    """The :class:`ExchangeLoad` of each of an epoch's exchanges, in order.

    Args:
        traffic: the epoch's exchanges (:func:`~supergcn.perf.traffic.epoch_traffic`).
        parameter_dtype: the wire type of the per-row parameters.

    Returns:
        One load per exchange.

    Raises:
        ValueError: a rows matrix is not square.
    """
    return [ExchangeLoad.of(step.rows, step.width, step.bits, parameter_dtype) for step in traffic.exchanges]


def epoch_seconds(traffic: EpochTraffic, edges_per_rank: np.ndarray, nodes_per_rank: np.ndarray,
                  machine: MachineProfile, parameter_dtype: str = DEFAULT_PARAMETER_DTYPE,
                  loads: list[ExchangeLoad] | None = None) -> dict[str, float]:
    """Predicted aggregation and exchange seconds of one training epoch (no overlap, no
    label propagation), and the bytes it sends.

    Args:
        traffic: the epoch's exchanges and aggregation passes (:func:`~supergcn.perf.traffic.epoch_traffic`).
        edges_per_rank: in-edges of each rank.
        nodes_per_rank: owned nodes of each rank (the self loops, where the model has them).
        machine: the machine's profile.
        parameter_dtype: the wire type of the per-row parameters.
        loads: :func:`epoch_loads` of ``traffic``, where already computed (for another machine).

    Returns:
        ``aggregation``, ``exchange`` and ``total`` seconds; ``bytes`` sent by all ranks
        in the epoch, and that of each kind (``data_bytes``, ``attention_bytes``).

    Raises:
        ValueError: a rows matrix is not square.
    """
    loads = epoch_loads(traffic, parameter_dtype) if loads is None else loads
    exchange, sent = 0.0, dict.fromkeys(TRAFFIC_KINDS, 0)
    for step, load in zip(traffic.exchanges, loads, strict=True):
        exchange += load_time(load, machine).seconds
        sent[step.kind] += load.total_bytes
    read = np.asarray(edges_per_rank, dtype=np.int64) + (np.asarray(nodes_per_rank) if traffic.self_loops else 0)
    aggregation = sum(aggregation_seconds(read, width, machine) for width in traffic.gather_widths)
    return {"aggregation": aggregation, "exchange": exchange, "total": aggregation + exchange,
            "bytes": sum(sent.values()), **{f"{kind}_bytes": value for kind, value in sent.items()}}
