"""DistGNN-MB's distributed mini-batch training (Vasimuddin et al., §3, Alg. 2):
``--batch-size B`` with the historical embedding cache and its asynchronous push.

Each rank trains mini-batches of its own training nodes, sampled on its own partition
(:mod:`supergcn.kernels.sampling` over :class:`~supergcn.methods.distgnn_mb_graph.PartitionGraph`):
solid sources bring their rows, halo sources (owned by other ranks, never expanded) take
theirs from the rank's cache of that layer (:class:`~supergcn.methods.distgnn_mb_cache.HistoricalEmbeddingCache`)
or, where the cache misses, are dropped from the batch with their edges. Step k of an epoch
of M steps:

1. sample the blocks from (seed, rank, epoch, k): layer l's destinations D_l draw
   ``fanouts[l]`` neighbours each;
2. if k ≥ d (``--hec-delay``), wait for the pushes started at step k − d and store what
   arrived in each layer's cache, stamped with the current step;
3. layer by layer: the layer's input is the previous layer's output on the solid sources
   (the input features at layer 0) and the cache's rows of the halo sources that hit;
   a miss's edges are removed, so the mean runs over the neighbours that remain,

       h_v^{l+1} = W_n · mean_{u ∈ N_l(v), u solid or hit} h_u^l + b + W_s · h_v^l

   for GraphSAGE; GAT's softmax runs over the same kept neighbours and v's own self loop
   (:mod:`supergcn.models.gat.block_attention`), its heads concatenated or averaged as
   over the full graph;

   if k < M − d and ``--hec-push`` nc > 0, for every peer j the layer's solid sources that
   are halos on j (``boundary[j]``) are candidates, up to nc of them are chosen by degree
   (:func:`~supergcn.methods.distgnn_mb_cache.select_push`) and their int64 ids and float32
   rows of ``h^l`` are sent to j with a nonblocking Alltoallv: Σ_j min(nc, candidates)·(8 + 4 d_l)
   bytes per layer (no gradient crosses ranks: cached rows are constants);
4. the loss, the NLL of the step's seeds summed and divided by the seeds of all ranks in
   the step, so that the summed gradient is that of the mean over the global batch;
   backward; one all-reduce of the gradients (and the loss); Adam.

Every rank runs the same M = max over ranks of ⌈n_train / B⌉ steps (DistGNN-MB's code
all-reduces the count): a rank's batches are consecutive B of its training nodes in an
order shuffled each epoch from (seed, rank, epoch), wrapping around where it has fewer
batches (so each of its nodes is a seed at least once an epoch; a rank with fewer than B
takes all of them every step). Cache ages count steps over the whole run; pushes are
never in flight across epochs (none starts in an epoch's last d steps). Evaluation is the
exact full-graph model (:mod:`supergcn.train.trainer`), as for every variant.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from supergcn.data.graph import load_graph
from supergcn.data.storage import load_array
from supergcn.distributed.collectives import allreduce_gradients
from supergcn.distributed.comm import Communicator
from supergcn.distributed.timing import PhaseTimer, phase
from supergcn.kernels.gather import GatherCsr
from supergcn.kernels.sampling import Block, sample_blocks
from supergcn.methods.distgnn_mb_cache import HistoricalEmbeddingCache, select_push
from supergcn.methods.distgnn_mb_graph import PartitionGraph
from supergcn.models.gat.block_attention import BlockAttention
from supergcn.models.gat.online_softmax import rank_attention
from supergcn.train.gnn import activate
from supergcn.train.inputs import written_out

#: Streams of the run that are DistGNN-MB's own: the epoch's order of seeds, the push's draws.
SHUFFLE_STREAM, PUSH_STREAM = 0xD157, 0x9054
#: The phases a mini-batch epoch reports besides the standard breakdown.
MINIBATCH_PHASES = ("sampling", "forward", "backward", "allreduce", "cache")


class _BlockAggregation(torch.autograd.Function):
    """``diag(s) A x`` on a block's CSR and, in backward, ``Aᵀ diag(s) g``."""

    @staticmethod
    def forward(ctx, x, csr: GatherCsr, row_scale):
        ctx.csr, ctx.row_scale = csr, row_scale
        return torch.from_numpy(csr.matmul(x.detach().contiguous().numpy(), row_scale=row_scale.numpy()))

    @staticmethod
    def backward(ctx, grad):
        scaled = (grad * ctx.row_scale[:, None]).contiguous().numpy()
        return torch.from_numpy(ctx.csr.transpose().matmul(scaled)), None, None


_aggregate = phase("aggregation")(_BlockAggregation.apply)


class BlockOps:
    """The aggregations of one layer of a mini-batch: what a layer (:mod:`supergcn.models`)
    aggregates with, in place of the full graph's :class:`~supergcn.distributed.graph_ops.GraphOps`.
    Rows in are the block's sources, rows out its destinations (the first ``num_dst`` sources).

    Args:
        indptr: the block's CSR pointers over its destinations, the misses' edges removed.
        indices: each kept edge's source position.
        num_src: the block's sources.
        layer: the block's layer, from 0 (the input layer's).
    """

    exact = True  # float32 and synchronous: a linear map of its input

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, num_src: int, layer: int) -> None:
        self.indptr, self.indices, self.num_src, self.layer = indptr, indices, num_src, layer
        self.csr = GatherCsr(indptr, indices, num_src)
        self.num_dst = len(indptr) - 1
        degree = torch.from_numpy(np.diff(indptr).astype(np.float32))
        self.inv_degree = torch.where(degree > 0, 1.0 / degree.clamp(min=1), torch.zeros_like(degree))
        self._built: dict = {}

    def cached(self, build):
        """The block's form of what a model builds once per rank over the full graph
        (:meth:`~supergcn.distributed.graph_ops.GraphOps.cached`), built on the first call
        and kept: for GAT's attention (:func:`~supergcn.models.gat.online_softmax.rank_attention`),
        the attention over this block (:class:`~supergcn.models.gat.block_attention.BlockAttention`).

        Args:
            build: what the model builds over the full graph.

        Returns:
            Its block form.

        Raises:
            NotImplementedError: a build without a block form (GCN's normalisation: a block's
                degrees are not DistGNN-MB's).
        """
        if build not in _BLOCK_FORMS:
            raise NotImplementedError(f"{getattr(build, '__qualname__', build)} has no mini-batch block form")
        if build not in self._built:
            self._built[build] = _BLOCK_FORMS[build](self)
        return self._built[build]

    def next_layer(self) -> int:
        """The layer of this block's aggregation (the full graph's counts them per pass).

        Returns:
            Its index.
        """
        return self.layer

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean over each destination's kept sources (0 where none is kept).

        Args:
            x: a row per source.

        Returns:
            A row per destination.
        """
        return _aggregate(x, self.csr, self.inv_degree)

    def destinations(self, x) -> torch.Tensor:
        """The destinations' own rows of a layer's input: its first ``num_dst`` rows.

        Args:
            x: a row per source (a tensor, or a layer input as :func:`~supergcn.train.inputs.written_out` takes).

        Returns:
            A row per destination.
        """
        return written_out(x)[:self.num_dst]


#: What a model builds over the full graph -> its form on a block, built from the block's ops.
_BLOCK_FORMS = {rank_attention: lambda ops: BlockAttention(ops.indptr, ops.indices, ops.num_src)}


@dataclass
class _Push:
    """One layer's push in flight: the ids and rows each peer sends this rank."""

    ids: object
    rows: object


class MiniBatchTraining:
    """One rank's DistGNN-MB epochs (module docstring). Building it reads the rank's rows of
    the graph and the partition's part ids.

    Args:
        config: the run's options (its ``batch_size``, ``fanouts`` and ``hec_*``).
        data: the rank's rows (:class:`~supergcn.train.data.RankData`).
        communicator: the job's communicator.
        timer: the rank's phase timer.
        model: the rank's replica of the model.
        optimizer: its optimizer.
    """

    def __init__(self, config, data, communicator: Communicator, timer: PhaseTimer, model, optimizer) -> None:
        self.config, self.data, self.communicator, self.timer = config, data, communicator, timer
        self.model, self.optimizer = model, optimizer
        self.parameters = list(model.parameters())
        self.rank, self.size = communicator.rank, communicator.size
        parts = load_array(config.partition, "parts", "partition", mmap=True)
        self.graph = PartitionGraph.from_graph(load_graph(config.graph, mmap=True), parts, self.size, self.rank,
                                               data.owned_old_ids)
        self.train_nodes = np.flatnonzero(data.train_mask.numpy())
        widths = [conv_input_width(conv) for conv in model.convs]
        life = config.hec_life
        # Only the rank's halos are pushed to it, so a cache never holds more tags than there
        # are halos: with that many lines no line is ever replaced, as with --hec-size lines,
        # and a rank's caches cost at most its halo rows (at P = 1, none) instead of
        # hec_size rows of every width (1 M input rows of 3,703 floats are 15 GB).
        lines = max(1, min(config.hec_size, self.graph.num_halo))
        self.caches = [HistoricalEmbeddingCache(lines, width, life) for width in widths]
        self.pending: deque = deque()  # (step of the epoch, [_Push per layer])
        self.steps_run = 0              # steps over the whole run: the caches' clock

    def epoch_steps(self) -> int:
        """M, the steps of every rank's epoch (collective).

        Returns:
            The most batches any rank has.
        """
        return max(self.communicator.comm.allgather(-(-len(self.train_nodes) // self.config.batch_size)))

    def train_epoch(self, epoch: int) -> tuple[float, dict]:
        """Train one epoch of M steps (collective).

        Args:
            epoch: the epoch, from 1.

        Returns:
            The mean over steps of the global loss, and the epoch's own figures: ``steps``,
            ``step_losses``, per layer ``hits`` and ``lookups``, ``pushed`` vertices per
            layer, and this rank's seconds per phase (:data:`MINIBATCH_PHASES`).
        """
        config = self.config
        if config.hec_flush:
            for cache in self.caches:
                cache.flush()
        steps = self.epoch_steps()
        order = epoch_order(self.train_nodes, config.seed, self.rank, epoch)
        seeds = [batch_seeds(order, step, config.batch_size) for step in range(steps)]
        totals = np.array([len(s) for s in seeds], dtype=np.int64)
        self.communicator.allreduce_sum(totals)
        before = [(cache.hits, cache.lookups) for cache in self.caches]
        figures = {"seconds": dict.fromkeys(MINIBATCH_PHASES, 0.0), "pushed": [0] * len(self.caches),
                   "step_losses": []}
        self.model.train()
        for step in range(steps):
            figures["step_losses"].append(self.train_step(epoch, step, steps, seeds[step], int(totals[step]), figures))
        figures.update(steps=steps, hits=[c.hits - h for c, (h, _) in zip(self.caches, before)],
                       lookups=[c.lookups - n for c, (_, n) in zip(self.caches, before)])
        return float(np.mean(figures["step_losses"])), figures

    def train_step(self, epoch: int, step: int, steps: int, seeds: np.ndarray, total: int, figures: dict) -> float:
        """One step (module docstring); returns its global loss."""
        seconds, config = figures["seconds"], self.config
        started = time.perf_counter()
        blocks = sample_blocks(self.graph, seeds, self.config.fanout_counts, (config.seed, self.rank, epoch, step))
        seconds["sampling"] += time.perf_counter() - started
        started = time.perf_counter()
        if self.pending and self.pending[0][0] == step - config.hec_delay:
            self._store(self.pending.popleft()[1])
        kept = [self._kept(layer, block) for layer, block in enumerate(blocks)]
        seconds["cache"] += time.perf_counter() - started
        pushing = step < steps - config.hec_delay and config.hec_push > 0 and self.size > 1
        started = time.perf_counter()
        logits = self._forward(blocks, kept, epoch, step, figures if pushing else None)
        seeds_t = torch.from_numpy(seeds)
        loss = self.timer.timed("elementwise", _nll, logits, self.data.y[seeds_t], max(total, 1))
        seconds["forward"] += time.perf_counter() - started
        started = time.perf_counter()
        loss.backward()
        seconds["backward"] += time.perf_counter() - started
        started = time.perf_counter()
        with self.timer.phase("optimizer"):
            global_loss = allreduce_gradients(self.parameters, loss, self.communicator)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=False)
        seconds["allreduce"] += time.perf_counter() - started
        self.steps_run += 1
        return global_loss

    def _kept(self, layer: int, block: Block) -> tuple[BlockOps, torch.Tensor]:
        """The block's aggregation with the cache's misses dropped, and the halo rows (zeros
        for the misses, whose edges are gone)."""
        halo = block.src[block.num_solid:]
        hit, rows = self.caches[layer].lookup(self.graph.global_ids[halo], self.steps_run)
        halo_rows = torch.zeros((len(halo), self.caches[layer].width), dtype=torch.float32)
        halo_rows[torch.from_numpy(hit)] = torch.from_numpy(rows)
        edge_kept = np.concatenate([np.ones(block.num_solid, dtype=bool), hit])[block.indices]
        edge_destination = np.repeat(np.arange(block.num_dst), np.diff(block.indptr))
        indptr = np.zeros(block.num_dst + 1, dtype=np.int64)
        np.cumsum(np.bincount(edge_destination[edge_kept], minlength=block.num_dst), out=indptr[1:])
        return BlockOps(indptr, block.indices[edge_kept], len(block.src), layer), halo_rows

    def _forward(self, blocks: list[Block], kept: list, epoch: int, step: int, figures: dict | None) -> torch.Tensor:
        """The model on the blocks, pushing each layer's solid rows where ``figures`` is given."""
        model = self.model
        x = torch.cat([self.data.x[torch.from_numpy(blocks[0].src[:blocks[0].num_solid])], kept[0][1]])
        pushes = []
        last = len(model.convs) - 1
        for layer, (conv, block, (ops, _)) in enumerate(zip(model.convs, blocks, kept)):
            if layer > 0:
                x = torch.cat([x, kept[layer][1]])
            if figures is not None:
                pushes.append(self._push(layer, block, x, epoch, step, figures))
            x = conv(x, ops)
            if layer < last:
                x = activate(x, model.norms[layer], model.dropout, model.training)
        if figures is not None:
            self.pending.append((step, pushes))
        return _log_softmax(x, -1)

    def _push(self, layer: int, block: Block, x: torch.Tensor, epoch: int, step: int, figures: dict) -> _Push:
        """Start the layer's push (module docstring, step 3)."""
        started = time.perf_counter()
        graph, solid = self.graph, block.src[:block.num_solid]
        rng = np.random.default_rng([self.config.seed, self.rank, epoch, step, layer, PUSH_STREAM])
        chosen, counts = [], np.zeros(self.size, dtype=np.int64)
        for peer in range(self.size):
            if peer == self.rank:
                continue
            candidates = np.flatnonzero(np.isin(solid, graph.boundary[peer], assume_unique=True))
            picked = select_push(candidates, graph.degree[solid[candidates]], self.config.hec_push, rng)
            chosen.append(picked)
            counts[peer] = len(picked)
        positions = np.concatenate(chosen + [np.empty(0, np.int64)]).astype(np.int64)
        ids = graph.global_ids[solid[positions]][:, None]
        rows = x.detach()[torch.from_numpy(positions)].contiguous().numpy()
        received = self._received_counts(counts)
        push = _Push(self.communicator.ialltoallv(np.ascontiguousarray(ids), counts, received, kind="ids"),
                     self.communicator.ialltoallv(rows, counts, received))
        figures["pushed"][layer] += int(counts.sum())
        figures["seconds"]["cache"] += time.perf_counter() - started
        return push

    def _received_counts(self, counts: np.ndarray) -> np.ndarray:
        """How many rows each peer pushes this rank (an Alltoall of the counts)."""
        return np.array(self.communicator.comm.alltoall(counts.tolist()), dtype=np.int64)

    def _store(self, pushes: list[_Push]) -> None:
        """Wait for a step's pushes and store what arrived, layer by layer."""
        for cache, push in zip(self.caches, pushes):
            ids, rows = push.ids.wait(), push.rows.wait()
            cache.store(ids[:, 0], rows, self.steps_run)

    def state(self) -> dict:
        """What continues across epochs, for a checkpoint (none of it is in flight between
        epochs): the caches' clock and lines.

        Returns:
            ``steps_run`` and each layer's cache state.
        """
        return {"steps_run": self.steps_run, "caches": [cache.state() for cache in self.caches]}

    def restore(self, state: dict) -> None:
        """Restore :meth:`state`'s figures.

        Args:
            state: what :meth:`state` returned on this rank.
        """
        self.steps_run = state["steps_run"]
        for cache, saved in zip(self.caches, state["caches"]):
            cache.restore(saved)

    def drain(self) -> None:
        """Wait for pushes still in flight (none between epochs; a failed step may leave some)."""
        while self.pending:
            for push in self.pending.popleft()[1]:
                push.ids.wait()
                push.rows.wait()


def epoch_order(train_nodes: np.ndarray, seed: int, rank: int, epoch: int) -> np.ndarray:
    """A rank's training nodes in the order of ``epoch``: shuffled from (seed, rank, epoch).

    Args:
        train_nodes: the rank's training nodes (local ids).
        seed: the run's seed.
        rank: the rank.
        epoch: the epoch, from 1.

    Returns:
        The nodes, permuted.
    """
    return np.random.default_rng([seed, rank, epoch, SHUFFLE_STREAM]).permutation(train_nodes)


def batch_seeds(order: np.ndarray, step: int, batch: int) -> np.ndarray:
    """The seeds of ``step``: ``batch`` consecutive nodes of the epoch's ``order``, wrapping
    around (all of them where there are at most ``batch``).

    Args:
        order: the epoch's order (:func:`epoch_order`).
        step: the step, from 0.
        batch: B.

    Returns:
        The step's seeds.
    """
    if len(order) <= batch:
        return order
    return order[(step * batch + np.arange(batch)) % len(order)]


def conv_input_width(conv) -> int:
    """A layer's input width (its linear layers' input features)."""
    return next(module.in_features for module in conv.modules() if isinstance(module, torch.nn.Linear))


def _nll(logits: torch.Tensor, labels: torch.Tensor, total: int) -> torch.Tensor:
    return F.nll_loss(logits, labels, reduction="sum") / total


_log_softmax = phase("elementwise")(F.log_softmax)
