"""The rows one rank trains on: its partition's features, labels, masks and plan."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from supergcn.data.graph import load_graph, read_graph_meta
from supergcn.errors import wrong_world_size
from supergcn.partition.metis import read_partition_manifest
from supergcn.partition.plan import RANK_HASHES_FILE, RankPlan, check_plan_file, load_rank_plan, read_plan_manifest
from supergcn.train.config import TrainConfig


@dataclass
class RankData:
    """The rows of one partition: features, labels, masks, and provenance hashes."""

    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    owned_old_ids: np.ndarray
    plan: RankPlan
    hashes: dict
    graph_name: str
    strategy: str
    num_classes: int


def load_rank_data(config: TrainConfig, rank: int, world_size: int) -> RankData:
    """Rank ``rank``'s rows of the graph, checked against its partition and plan.

    What a rank reads does not grow with the graph or the number of ranks beyond its own
    share: three small manifests, its plan file (which carries its nodes' original ids),
    its entry of the plan's hash list, and its own rows of the memory-mapped node arrays.

    Raises:
        SuperGCNError: the partition or plan belongs to another graph or partition, or the
            plan is for another number of ranks than ``world_size``.
    """
    meta = read_graph_meta(config.graph)
    part_manifest = read_partition_manifest(config.partition, meta["hash"])
    plan_manifest = read_plan_manifest(config.plan, meta["hash"], part_manifest["partition_hash"])
    if plan_manifest["num_ranks"] != world_size:
        raise wrong_world_size(f"plan {config.plan}", plan_manifest["num_ranks"], world_size)
    if rank == 0:  # the hash list is P entries: one rank vouches for it, and a mismatch ends the job
        check_plan_file(config.plan, RANK_HASHES_FILE, plan_manifest)
    plan = load_rank_plan(config.plan, rank)
    graph = load_graph(config.graph, mmap=True)
    owned = plan.owned_old_ids

    def rows(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array[owned]))

    plan_hash = hashlib.blake2b((Path(config.plan) / "plan.json").read_bytes(), digest_size=16).hexdigest()
    return RankData(x=rows(graph.features), y=rows(graph.labels), train_mask=rows(graph.train_mask),
                    val_mask=rows(graph.val_mask), test_mask=rows(graph.test_mask), owned_old_ids=owned,
                    plan=plan, graph_name=meta["name"], strategy=plan_manifest["strategy"],
                    num_classes=meta["num_classes"],
                    hashes={"graph_hash": meta["hash"], "partition_hash": part_manifest["partition_hash"],
                            "plan_hash": plan_hash})
