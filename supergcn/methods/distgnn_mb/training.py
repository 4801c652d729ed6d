"""DistGNN-MB's training on one rank (its maths: :mod:`supergcn.methods.distgnn_mb`): the
epoch of mini-batch steps it takes over from the full-batch one, and its figures."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import torch

from supergcn.data.graph import load_graph
from supergcn.data.storage import load_array
from supergcn.distributed.protocol import RankMethod
from supergcn.distributed.timing import PhaseTimer
from supergcn.kernels.sampling import Block, sample_blocks
from supergcn.methods.distgnn_mb.blocks import BlockOps
from supergcn.methods.distgnn_mb.cache import HistoricalEmbeddingCache, select_push
from supergcn.methods.distgnn_mb.graph import PartitionGraph

#: Streams of the run that are DistGNN-MB's own: the epoch's order of seeds, the push's draws.
SHUFFLE_STREAM, PUSH_STREAM = 0xD157, 0x9054
#: The stages of a step a mini-batch epoch reports besides the standard breakdown: each
#: instant of a step is booked to one of them (the push, made as the forward takes each
#: layer's input, to ``cache``, not also to ``forward``).
MINIBATCH_PHASES = ("sampling", "forward", "backward", "allreduce", "cache")


@dataclass
class _Push:
    """One layer's push in flight: the ids and rows each peer sends this rank."""

    ids: object
    rows: object


class MiniBatchTraining(RankMethod):
    """One rank's DistGNN-MB epochs (:mod:`supergcn.methods.distgnn_mb`): the step that takes
    over from the full-batch one. Building it reads the rank's rows of the graph and the
    partition's part ids.

    Args:
        context: the rank's :class:`~supergcn.train.steps.RankContext`: the run's options
            (its ``batch_size``, ``fanouts``, ``hec_*`` and ``kernel``), the rank's rows, the
            communicator and timer, the model, its loss and its optimizer step.
    """

    def __init__(self, context) -> None:
        config, data, communicator = context.config, context.data, context.communicator
        self.config, self.data, self.communicator, self.timer = config, data, communicator, context.timer
        self.model, self.loss, self.optimizer_step = context.model, context.loss, context.optimizer_step
        self.rank, self.size = communicator.rank, communicator.size
        parts = load_array(config.partition, "parts", "partition", mmap=True)
        self.graph = PartitionGraph.from_graph(load_graph(config.graph, mmap=True), parts, self.size, self.rank,
                                               data.owned_old_ids)
        self.train_nodes = np.flatnonzero(data.train_mask.numpy())
        widths = [conv_input_width(conv) for conv in self.model.convs]
        # Only the rank's halos are pushed to it, so a cache never holds more tags than there
        # are halos: with that many lines no line is ever replaced, as with --hec-size lines,
        # and a rank's caches cost at most its halo rows (at P = 1, none) instead of
        # hec_size rows of every width (1 M input rows of 3,703 floats are 15 GB).
        lines = max(1, min(config.hec_size, self.graph.num_halo))
        self.caches = [HistoricalEmbeddingCache(lines, width, config.hec_life) for width in widths]
        self.pending: deque = deque()  # (step of the epoch, [_Push per layer])
        self.steps_run = 0              # steps over the whole run: the caches' clock
        self.stages = PhaseTimer(MINIBATCH_PHASES)
        self.figures: dict = {}

    @property
    def step(self) -> MiniBatchTraining:
        """The method is the epoch's step."""
        return self

    def epoch_steps(self) -> int:
        """M, the steps of every rank's epoch (collective).

        Returns:
            The most batches any rank has.
        """
        return max(self.communicator.comm.allgather(-(-len(self.train_nodes) // self.config.batch_size)))

    def run(self, epoch: int) -> float:
        """Train one epoch of M steps (collective); its figures wait in :attr:`figures` for
        :meth:`end_epoch`: ``steps``, ``step_losses``, per layer ``hits`` and ``lookups``,
        ``pushed`` vertices per layer, and this rank's seconds per stage
        (:data:`MINIBATCH_PHASES`).

        Args:
            epoch: the epoch, from 1.

        Returns:
            The mean over steps of the global loss.
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
        self.stages.reset()
        figures = {"pushed": [0] * len(self.caches), "step_losses": []}
        self.model.train()
        for step in range(steps):
            figures["step_losses"].append(self.train_step(epoch, step, steps, seeds[step], int(totals[step]), figures))
        figures.update(steps=steps, hits=[c.hits - h for c, (h, _) in zip(self.caches, before)],
                       lookups=[c.lookups - n for c, (_, n) in zip(self.caches, before)],
                       seconds=dict(self.stages.seconds))
        self.figures = figures
        return float(np.mean(figures["step_losses"]))

    def train_step(self, epoch: int, step: int, steps: int, seeds: np.ndarray, total: int, figures: dict) -> float:
        """One step (:mod:`supergcn.methods.distgnn_mb`); returns its global loss."""
        config, stages = self.config, self.stages
        with stages.phase("sampling"):
            blocks = sample_blocks(self.graph, seeds, config.fanout_counts, (config.seed, self.rank, epoch, step))
        pushes: list[_Push] = []
        pushing = step < steps - config.hec_delay and config.hec_push > 0 and self.size > 1

        def push(layer: int, rows: torch.Tensor) -> None:
            if pushing:
                with stages.phase("cache"):
                    pushes.append(self._push(layer, blocks[layer], rows, epoch, step, figures))
        with stages.phase("cache"):
            if self.pending and self.pending[0][0] == step - config.hec_delay:
                self._store(self.pending.popleft()[1])
            layers = [self._kept(layer, block, push) for layer, block in enumerate(blocks)]
        with stages.phase("forward"):
            logits = self.model(self.data.x[torch.from_numpy(blocks[0].src[:blocks[0].num_solid])], layers)
            if pushing:
                self.pending.append((step, pushes))
            loss = self.timer.timed("elementwise", self.loss, logits, self.data.y[torch.from_numpy(seeds)],
                                    max(total, 1))
        with stages.phase("backward"):
            loss.backward()
        with stages.phase("allreduce"):
            global_loss = self.optimizer_step(loss)
        self.steps_run += 1
        return global_loss

    def _kept(self, layer: int, block: Block, push) -> BlockOps:
        """The block's ops with the cache's misses dropped and its halo rows (zeros for the
        misses, whose edges are gone), pushing the layer's rows as the layer takes them."""
        halo = block.src[block.num_solid:]
        hit, rows = self.caches[layer].lookup(self.graph.global_ids[halo], self.steps_run)
        halo_rows = torch.zeros((len(halo), self.caches[layer].width), dtype=torch.float32)
        halo_rows[torch.from_numpy(hit)] = torch.from_numpy(rows)
        edge_kept = np.concatenate([np.ones(block.num_solid, dtype=bool), hit])[block.indices]
        edge_destination = np.repeat(np.arange(block.num_dst), np.diff(block.indptr))
        indptr = np.zeros(block.num_dst + 1, dtype=np.int64)
        np.cumsum(np.bincount(edge_destination[edge_kept], minlength=block.num_dst), out=indptr[1:])
        return BlockOps(indptr, block.indices[edge_kept], len(block.src), layer, self.config.kernel, halo_rows, push)

    def _push(self, layer: int, block: Block, x: torch.Tensor, epoch: int, step: int, figures: dict) -> _Push:
        """Start the layer's push (:mod:`supergcn.methods.distgnn_mb`, step 3)."""
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
        return push

    def _received_counts(self, counts: np.ndarray) -> np.ndarray:
        """How many rows each peer pushes this rank (an Alltoall of the counts)."""
        return np.array(self.communicator.comm.alltoall(counts.tolist()), dtype=np.int64)

    def _store(self, pushes: list[_Push]) -> None:
        """Wait for a step's pushes and store what arrived, layer by layer."""
        for cache, push in zip(self.caches, pushes):
            ids, rows = push.ids.wait(), push.rows.wait()
            cache.store(ids[:, 0], rows, self.steps_run)

    def end_epoch(self) -> dict:
        """The epoch's ``minibatch`` entry (:func:`minibatch_record`; collective).

        Returns:
            ``{"minibatch": record}`` on rank 0, empty on the others.
        """
        record = minibatch_record(self.communicator.comm, self.figures)
        return {} if record is None else {"minibatch": record}

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

    def close(self) -> None:
        """Wait for pushes still in flight (none between epochs; a failed step may leave some)."""
        while self.pending:
            for push in self.pending.popleft()[1]:
                push.ids.wait()
                push.rows.wait()


def minibatch_record(comm, figures: dict) -> dict | None:
    """A mini-batch epoch's own figures, the ``minibatch`` entry of its metrics line
    (collective: rank 0 gets it, the others None): ``steps``, ``step_losses`` (each step's
    global loss), per layer the cache's ``hit_rate`` (hits over lookups of all ranks; None
    where nothing was looked up), ``lookups`` and the vertices ``pushed`` (all ranks), and
    ``seconds`` per stage, the slowest rank's.

    Args:
        comm: the job's MPI communicator.
        figures: this rank's figures (:meth:`MiniBatchTraining.run`).

    Returns:
        The record on rank 0, None on the others.
    """
    gathered = comm.gather(figures, root=0)
    if comm.Get_rank() != 0:
        return None
    hits = np.sum([f["hits"] for f in gathered], axis=0)
    lookups = np.sum([f["lookups"] for f in gathered], axis=0)
    return {"steps": figures["steps"], "step_losses": figures["step_losses"],
            "hit_rate": [float(h / n) if n else None for h, n in zip(hits, lookups)],
            "lookups": [int(n) for n in lookups],
            "pushed": [int(p) for p in np.sum([f["pushed"] for f in gathered], axis=0)],
            "seconds": {name: max(f["seconds"][name] for f in gathered) for name in figures["seconds"]}}


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


def build(context) -> MiniBatchTraining:
    """The rank's mini-batch training (its graph, sampler and caches).

    Args:
        context: the rank's :class:`~supergcn.train.steps.RankContext`.

    Returns:
        The method's state on this rank (collective).
    """
    return MiniBatchTraining(context)
