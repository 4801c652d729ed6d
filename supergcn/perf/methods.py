"""The compared methods' terms in the performance model, predicted beside SuperGCN's hybrid +
Int2 and post FP32 exchanges: the plan-only study's ``perf_methods`` table.

A method is predicted where its card has terms here (:attr:`~supergcn.methods.card.MethodCard.performance`),
which say, as data, what its epoch moves: the post plan's boundary rows (``boundary``:
BNS-GCN's, sampled; PipeGCN's, behind the compute), the same rows one peer at a time
(``sequential``: SAR's) or MixGCN's row/column transposes (``transposes``); the table names
each row as its terms do.

Both compared methods train GraphSAGE on the post plan, POST[i][j] being the rows rank i
sends rank j per exchange (its boundary sources with an edge into j), with layer 0's
aggregation of the input features computed once before training (their ``--use-pp``,
on in every published script), so layer 0 exchanges and gathers nothing per epoch. Their
layers aggregate before they transform, so a layer l ≥ 1 exchanges rows of its input
width W_l (the hidden width), float32, forward POST and backward POST^T (the gradients
back to the rows' owners):

* ``vanilla``, the synchronous exchange both start from: per epoch and layer l ≥ 1, one
  Alltoallv of POST rows of W_l values forward and one of POST^T rows backward;
* ``bns-<p>``, BNS-GCN at boundary rate p: each epoch every rank draws
  k_ij = ⌊p · POST[i][j]⌋ of its rows for each peer (Python's ``int(p * n)``) and sends
  their ids once (one Alltoallv, 8 B per id), then exchanges as vanilla with K in place
  of POST. Bytes per epoch: Σ_ij 8 k_ij + Σ_{l≥1} 2 Σ_ij k_ij W_l 4; p = 0 makes no call.
  A receiver aggregates over the sampled boundary rows only: rank j reads its local
  in-edges and, of the C_ij cut edges from rank i, the expected share k_ij / POST[i][j];
* ``pipegcn``: vanilla's exchanges, each consumed one epoch after it is launched, so it
  runs behind the epoch's compute: T = max(compute, exchange), where every synchronous
  method pays T = compute + exchange;
* ``sar``, SAR's sequential aggregation: vanilla's rows, each exchange as P - 1 pairwise
  steps, each a two-rank exchange's call and latency and its slowest rank's bytes
  (:func:`sequential_epoch`), at the widths its runs exchange: nothing precomputed, narrowing
  layers projecting first (but with aggregate_first). Its memory is one peer's rows, 4 W max_ij POST[j][i]
  B, where vanilla's receive buffer holds 4 W max_i sum_j POST[j][i] B.

``mixgcn``, MixGCN's mixture of parallelism (MoP, :mod:`supergcn.methods.mixgcn`), trains the
same GraphSAGE without a plan's boundary: rank i holds the whole adjacency and, of a
d-wide layer input, the columns c_i(d) of :func:`~supergcn.kernels.ranges.even_bounds`
for all N rows, and updates its n_i rows (the partition's part: its row block). Its layers
aggregate first and nothing is precomputed, so with d_0 … d_{L-1} the layers' input widths
an epoch makes 1 + 4 (L - 1) all-to-all transposes (column → row at every layer forward,
row → column before it at layers l ≥ 1, both again backward at l ≥ 1), each
T(d) = N d - Σ_i n_i c_i(d) float32 values over all ranks (Prop. 3.4: about N d (1 - 1/P),
constant in P), :func:`~supergcn.methods.mixgcn.exchange.epoch_transpose_values` in all. Per rank,
a row → column transpose sends n_i (d - c_i) values and receives (N - n_i) c_i; a
column → row transpose the reverse. Every transpose addresses all P - 1 peers and none
overlaps the compute (the aggregation needs all its columns, the update all its rows).
Rank i aggregates nnz(Â) c_i(d) values per pass (balanced within one column), one pass per
layer forward and one per layer l ≥ 1 backward; its dense work is that of its n_i rows, as
for the others. It holds 8 (N + 1) + 8 nnz(Â) B of replicated adjacency (int64 row
pointers and column indices) and 4 N c_i(d_l) B per layer's column slice.

SuperGCN's rows (``hybrid-int2``, ``post-fp32``) are the epochs of
:func:`~supergcn.perf.traffic.epoch_traffic`, as the ``perf_predictions`` table has them.
Each exchange is timed by :func:`~supergcn.perf.prediction.load_time` (Eq. 2 and its
per-call cost). Rank i's compute is its aggregation, V_i values read (rows × width,
summed over the epoch's passes) × 4 B over the aggregation throughput, plus its dense
layers where the profile has a GEMM throughput TH_g and call cost g:
n_i · Φ / TH_g + G · g, with n_i its nodes, Φ = Σ_l 4 a_l b_l (1 + 1 + [l ≥ 1]) the
flops per node (SAGE's two a_l × b_l weights forward, their gradients, and the input's
gradient in every layer but the first) and G = 6 L − 2 the GEMMs (two per product). The
slowest rank's compute counts. Dense work is the same for every method (the same model
on the same nodes), so it matters only where an exchange hides behind it (PipeGCN);
without TH_g in the profile it is left out, and PipeGCN hides its exchange behind the
aggregation alone: a lower bound on what it hides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from supergcn.kernels.ranges import even_bounds
from supergcn.methods import MethodCard, method_cards
from supergcn.models import card
from supergcn.naming import DEFAULT_PARAMETER_DTYPE
from supergcn.perf.prediction import ExchangeLoad, MachineProfile, epoch_loads, load_time
from supergcn.perf.traffic import epoch_traffic

#: BNS-GCN's boundary rates predicted unless told otherwise: those of its published sweep
#: besides p = 0 (which sends nothing and trains on each rank's own part alone).
DEFAULT_BOUNDARY_RATES = (0.1, 0.01)
#: Bytes of one sampled row's id (int64).
ID_BYTES = 8
#: The model both compared methods train, and its floats.
METHODS_MODEL = "sage"
_FP32_BYTES = 4
#: The table's names of SuperGCN's rows and of the synchronous boundary exchange the compared
#: methods start from.
HYBRID_INT2, POST_FP32, VANILLA = "hybrid-int2", "post-fp32", "vanilla"


def predicted_methods(exchange: str) -> list[MethodCard]:
    """The methods with terms here whose epoch moves ``exchange`` (``boundary``, ``transposes``).

    Args:
        exchange: what the epoch moves.

    Returns:
        Their cards.
    """
    return [method for method in method_cards() if method.performance and method.performance.exchange == exchange]


def sampled_method(row: str, rate: float) -> str:
    """The table's name of a sampling method's row at boundary rate ``rate`` (``bns-0.1``)."""
    return f"{row}-{rate:g}"


def sampled_rows(post_rows: np.ndarray, rate: float) -> np.ndarray:
    """k_ij = ⌊rate · POST[i][j]⌋: the boundary rows BNS-GCN samples per pair and epoch.

    Args:
        post_rows: P x P, POST[i][j] the rows rank i sends rank j.
        rate: the boundary rate p, 0 to 1.

    Returns:
        P x P int64, as Python's ``int(p * n)`` (truncation: the product is not negative).

    Raises:
        ValueError: ``rate`` is outside [0, 1].
    """
    if not 0 <= rate <= 1:
        raise ValueError(f"a boundary rate is a share of the boundary rows, 0 to 1, not {rate}")
    return (rate * np.asarray(post_rows, dtype=np.int64)).astype(np.int64)


def id_load(rows: np.ndarray) -> ExchangeLoad:
    """The load of sending ``rows[i][j]`` int64 ids from rank i to rank j in one Alltoallv.

    Args:
        rows: P x P ids.

    Returns:
        An unquantized load of 8 B per id.
    """
    rows = np.asarray(rows, dtype=np.int64)
    return ExchangeLoad(rows.shape[0], 32, rows.sum(axis=1) * ID_BYTES, np.zeros(rows.shape[0], dtype=np.int64),
                        rows.sum(axis=1), rows.sum(axis=0))


@dataclass(frozen=True)
class Layers:
    """The GraphSAGE the methods train.

    Args:
        in_features: input features.
        hidden: hidden width.
        out_features: classes.
        num_layers: graph convolutions, L.
        aggregate_first: the study's ``training.aggregate_first``: SuperGCN's and SAR's
            layers aggregate first wherever they may (the others' layouts are their own).
    """

    in_features: int
    hidden: int
    out_features: int
    num_layers: int
    aggregate_first: bool = False

    @property
    def dims(self) -> list[int]:
        """Each layer's input width, then the last layer's output width."""
        return [self.in_features] + [self.hidden] * (self.num_layers - 1) + [self.out_features]

    @property
    def exchanged_widths(self) -> list[int]:
        """W_l of the layers l ≥ 1, which exchange with layer 0 precomputed: their input widths."""
        return self.dims[1:-1]

    def dense_flops_per_node(self) -> int:
        """Φ = Σ_l 4 a_l b_l (2 + [l ≥ 1]) (module docstring)."""
        dims = self.dims
        return sum(4 * a * b * (2 + (layer > 0)) for layer, (a, b) in enumerate(zip(dims[:-1], dims[1:])))

    @property
    def dense_calls(self) -> int:
        """G = 6 L − 2 GEMMs per epoch: two per product (module docstring)."""
        return 6 * self.num_layers - 2


@dataclass(frozen=True)
class MethodEpoch:
    """What one method's training epoch sends and reads, whatever the machine.

    Args:
        method: its name in the table.
        loads: one per Alltoallv of the epoch, in order.
        values_read: per rank, the values its aggregation passes read (rows × width, summed).
        pipelined: whether the exchanges run behind the compute (PipeGCN).
        memory_bytes: the largest rank's memory the method's layout costs, where the model
            has it (MixGCN's replicated adjacency and column slices; the exchange's receive
            buffer of vanilla and SAR; None for the others).
    """

    method: str
    loads: list[ExchangeLoad]
    values_read: np.ndarray
    pipelined: bool = False
    memory_bytes: int | None = None

    @property
    def bytes(self) -> int:
        """Bytes all ranks send in the epoch."""
        return sum(load.total_bytes for load in self.loads)

    @property
    def calls(self) -> int:
        """Alltoallv calls per epoch (a quantized exchange makes two: data and parameters)."""
        return sum(1 if load.bits == 32 else 2 for load in self.loads)


def supergcn_epoch(method: str, pre_rows: np.ndarray, post_rows: np.ndarray, layers: Layers, bits: int,
                   edges_per_rank: np.ndarray, parameter_dtype: str = DEFAULT_PARAMETER_DTYPE) -> MethodEpoch:
    """A SuperGCN epoch of GraphSAGE on a plan's PRE and POST rows (:func:`epoch_traffic`).

    Args:
        method: its name in the table.
        pre_rows: P x P PRE rows of the strategy.
        post_rows: P x P POST rows of the strategy.
        layers: the model's widths.
        bits: 32, or the quantized width.
        edges_per_rank: in-edges of each rank.
        parameter_dtype: the wire type of the per-row parameters.

    Returns:
        The epoch.
    """
    traffic = epoch_traffic(METHODS_MODEL, pre_rows, post_rows, layers.in_features, layers.hidden,
                            layers.out_features, layers.num_layers, bits, aggregate_first=layers.aggregate_first)
    read = np.asarray(edges_per_rank, dtype=np.int64) * sum(traffic.gather_widths)
    return MethodEpoch(method, epoch_loads(traffic, parameter_dtype), read)


def boundary_epoch(method: str, rows: np.ndarray, layers: Layers, edges_read: np.ndarray, sends_ids: bool = False,
                   pipelined: bool = False) -> MethodEpoch:
    """An epoch of the compared methods: ``rows`` forward and transposed back at every
    layer l ≥ 1 (layer 0 precomputed), each layer reading ``edges_read`` rows forward and
    backward.

    Args:
        method: its name in the table.
        rows: P x P, [i][j] the boundary rows rank i sends rank j per exchange.
        layers: the model's widths.
        edges_read: per rank, the in-edges its aggregation reads.
        sends_ids: whether the rows' ids go first (BNS-GCN's sample).
        pipelined: whether the exchanges run behind the compute (PipeGCN).

    Returns:
        The epoch.
    """
    widths = layers.exchanged_widths
    forward = [ExchangeLoad.of(rows, width, 32) for width in widths]
    backward = [ExchangeLoad.of(np.asarray(rows).T, width, 32) for width in reversed(widths)]
    read = np.asarray(edges_read, dtype=np.float64) * 2 * sum(widths)
    ids = [id_load(rows)] if sends_ids else []
    return MethodEpoch(method, ids + forward + backward, read, pipelined)


def sequential_epoch(method: str, rows: np.ndarray, layers: Layers, edges_read: np.ndarray) -> MethodEpoch:
    """SAR's epoch: :func:`boundary_epoch`'s rows at its runs' widths (nothing precomputed; a
    narrowing layer projects first, as DGL's SAGEConv, unless ``layers.aggregate_first``;
    every layer exchanges forward, and back where its input needs the gradient), each
    exchange as P - 1 pairwise steps (at
    step k rank i sends POST[i][i+k] rows and receives POST[i-k][i]; backward the
    gradients of those from i - k go back, as :mod:`supergcn.methods.sar` does), and the
    memory of the largest peer's rows.

    Args:
        method: its name in the table.
        rows: P x P, [i][j] the boundary rows rank i sends rank j per exchange.
        layers: the model's widths.
        edges_read: per rank, the in-edges its aggregation reads.

    Returns:
        The epoch.
    """
    rows = np.asarray(rows, dtype=np.int64)
    num_ranks = len(rows)
    ranks = np.arange(num_ranks)

    def steps(backward: bool, width: int) -> list[ExchangeLoad]:
        loads = []
        for k in range(1, num_ranks):
            ahead, behind = rows[ranks, (ranks + k) % num_ranks], rows[(ranks - k) % num_ranks, ranks]
            sent, received = (behind, ahead) if backward else (ahead, behind)
            # A two-rank exchange's call and latency: every rank sends one peer and receives from another.
            loads.append(ExchangeLoad(2, 32, sent * width * _FP32_BYTES, np.zeros(num_ranks, dtype=np.int64),
                                      sent * width, received * width))
        return loads
    exchanges = card(METHODS_MODEL).exchanges(layers.in_features, layers.hidden, layers.out_features, layers.num_layers,
                                              aggregate_first=layers.aggregate_first)
    widths = [(layer.width, False) for layer in exchanges]
    widths += [(layer.width, True) for layer in reversed(exchanges) if layer.backward]
    read = np.asarray(edges_read, dtype=np.float64) * sum(width for width, _ in widths)
    memory = _FP32_BYTES * max(layer.width for layer in exchanges) * int(rows.max(initial=0))
    return MethodEpoch(method, [load for width, back in widths for load in steps(back, width)], read,
                       memory_bytes=memory)


def sampled_edges(edges_per_rank: np.ndarray, cut_edges: np.ndarray, post_rows: np.ndarray,
                  sampled: np.ndarray) -> np.ndarray:
    """Rank j's expected in-edges after BNS-GCN's draw: its local ones and, per sender i,
    the share k_ij / POST[i][j] of the C_ij cut edges from i.

    Args:
        edges_per_rank: in-edges of each rank, local and remote.
        cut_edges: P x P, C_ij the edges from rank i's sources into rank j.
        post_rows: P x P, POST[i][j].
        sampled: P x P, k_ij.

    Returns:
        Per rank, float.
    """
    cut = np.asarray(cut_edges, dtype=np.float64)
    share = np.divide(sampled, post_rows, out=np.zeros_like(cut), where=np.asarray(post_rows) > 0)
    return np.asarray(edges_per_rank, dtype=np.float64) - cut.sum(axis=0) + (cut * share).sum(axis=0)


def method_epochs(kinds: dict[str, tuple[np.ndarray, np.ndarray]], cut_edges: np.ndarray,
                  edges_per_rank: np.ndarray, layers: Layers, boundary_rates=DEFAULT_BOUNDARY_RATES,
                  parameter_dtype: str = DEFAULT_PARAMETER_DTYPE) -> list[MethodEpoch]:
    """Every method's epoch on one (graph, P) (module docstring).

    Args:
        kinds: ``hybrid`` and ``post`` -> (PRE rows, POST rows), P x P each
            (:func:`~supergcn.plan.statistics.strategy_row_kinds`).
        cut_edges: P x P, C_ij the edges from rank i's sources into rank j.
        edges_per_rank: in-edges of each rank.
        layers: the model's widths.
        boundary_rates: BNS-GCN's rates p.
        parameter_dtype: the wire type of Int2's per-row parameters.

    Returns:
        hybrid + Int2, post FP32, vanilla (its memory: the receive buffer of every peer's
        rows), then each method that moves boundary rows: a sampling one (BNS-GCN) at each
        rate, the others once (PipeGCN), then each that moves them one peer at a time (SAR).

    Raises:
        ValueError: a rate is outside [0, 1].
    """
    post = np.asarray(kinds["post"][1], dtype=np.int64)
    vanilla = boundary_epoch(VANILLA, post, layers, edges_per_rank)
    at_once = _FP32_BYTES * max(layers.exchanged_widths) * int(post.sum(axis=0).max(initial=0))
    epochs = [supergcn_epoch(HYBRID_INT2, *kinds["hybrid"], layers, 2, edges_per_rank, parameter_dtype),
              supergcn_epoch(POST_FP32, *kinds["post"], layers, 32, edges_per_rank, parameter_dtype),
              MethodEpoch(vanilla.method, vanilla.loads, vanilla.values_read, memory_bytes=at_once)]
    for method in predicted_methods("boundary"):
        terms = method.performance
        if not terms.sampled:
            epochs.append(boundary_epoch(terms.row, post, layers, edges_per_rank, pipelined=terms.pipelined))
            continue
        for rate in boundary_rates:
            sampled = sampled_rows(post, rate)
            edges = sampled_edges(edges_per_rank, cut_edges, post, sampled)
            epoch = boundary_epoch(sampled_method(terms.row, rate), sampled, layers, edges, sends_ids=True,
                                   pipelined=terms.pipelined)
            epochs.append(epoch if rate > 0 else MethodEpoch(epoch.method, [], epoch.values_read))
    epochs += [sequential_epoch(method.performance.row, post, layers, edges_per_rank)
               for method in predicted_methods("sequential")]
    return epochs


def _fp32_load(sent: np.ndarray, received: np.ndarray) -> ExchangeLoad:
    """A float32 Alltoallv in which rank i sends ``sent[i]`` and receives ``received[i]`` values."""
    return ExchangeLoad(len(sent), 32, sent * _FP32_BYTES, np.zeros(len(sent), dtype=np.int64), sent, received)


def transpose_loads(rows: np.ndarray, width: int) -> tuple[ExchangeLoad, ExchangeLoad]:
    """MixGCN's two transposes of a ``width``-wide matrix (module docstring): row → column,
    where rank i sends its n_i rows' other columns, n_i (d - c_i) values, and receives its
    c_i columns of the N - n_i other rows; column → row, the reverse. Each moves
    :func:`~supergcn.methods.mixgcn.exchange.transpose_values` values over all ranks.

    Args:
        rows: n_i, the rows per rank.
        width: d.

    Returns:
        The row → column load, then the column → row load.
    """
    rows = np.asarray(rows, dtype=np.int64)
    columns = np.diff(even_bounds(width, len(rows)))
    own_rows_other_columns = rows * (width - columns)
    other_rows_own_columns = (rows.sum() - rows) * columns
    return (_fp32_load(own_rows_other_columns, other_rows_own_columns),
            _fp32_load(other_rows_own_columns, own_rows_other_columns))


def mixture_epoch(method: MethodCard, rows: np.ndarray, layers: Layers, adjacency_entries: int) -> MethodEpoch:
    """An epoch of MixGCN's mixture of parallelism (module docstring): forward, layer 0's
    column → row transpose (its input is held in columns) and both transposes at every
    later layer; backward, both at every layer l ≥ 1, last layer first. Rank i reads
    nnz(Â) c_i(d) values per aggregation pass and holds 8 (N + 1) + 8 nnz(Â) + 4 N Σ_l c_i(d_l) B.

    Args:
        method: the method whose epoch moves transposes (its row name and the memory its
            card says a rank holds beside its share).
        rows: n_i, the rows per rank (the partition's parts as row blocks).
        layers: the model's widths; the transposed ones are the layers' inputs, d_0 … d_{L-1}.
        adjacency_entries: nnz(Â), the graph's directed edges.

    Returns:
        The epoch; its bytes are 4 B × :func:`~supergcn.methods.mixgcn.exchange.epoch_transpose_values`.
    """
    rows = np.asarray(rows, dtype=np.int64)
    widths = layers.dims[:-1]
    forward = [transpose_loads(rows, widths[0])[1]]
    for width in widths[1:]:
        forward += transpose_loads(rows, width)
    backward = [load for width in reversed(widths[1:]) for load in transpose_loads(rows, width)]
    columns = {width: np.diff(even_bounds(width, len(rows))) for width in widths}
    passes = widths + widths[1:]
    read = adjacency_entries * sum(columns[width] for width in passes)
    num_nodes = int(rows.sum())
    memory = (method.memory.kept(num_nodes, adjacency_entries, "numba")
              + _FP32_BYTES * num_nodes * sum(columns[width] for width in widths))
    return MethodEpoch(method.performance.row, forward + backward, read, memory_bytes=int(memory.max()))


def method_seconds(epoch: MethodEpoch, nodes_per_rank: np.ndarray, layers: Layers,
                   machine: MachineProfile) -> dict[str, float]:
    """Predicted seconds of one epoch of a method on a machine (module docstring).

    Args:
        epoch: the method's epoch.
        nodes_per_rank: owned nodes of each rank.
        layers: the model's widths (its dense work).
        machine: the machine's profile.

    Returns:
        ``exchange`` (all the epoch's Alltoallv), ``aggregation`` and ``dense`` at the rank
        whose compute is slowest (``dense`` NaN where the profile has no GEMM
        throughput), ``compute`` (their sum) and ``total``: compute + exchange, or their
        maximum where the method is pipelined.
    """
    exchange = sum(load_time(load, machine).seconds for load in epoch.loads)
    aggregation = np.asarray(epoch.values_read, dtype=np.float64) * _FP32_BYTES / machine.aggregation_bytes_per_s
    if machine.dense_flops_per_s is None:
        dense = np.full_like(aggregation, np.nan)
    else:
        dense = (np.asarray(nodes_per_rank, dtype=np.float64) * layers.dense_flops_per_node()
                 / machine.dense_flops_per_s + layers.dense_calls * machine.dense_call_s)
    compute = aggregation + np.nan_to_num(dense)
    rank = int(np.argmax(compute))
    slowest = float(compute[rank])
    total = max(slowest, exchange) if epoch.pipelined else slowest + exchange
    return {"exchange": exchange, "aggregation": float(aggregation[rank]), "dense": float(dense[rank]),
            "compute": slowest, "total": total}
