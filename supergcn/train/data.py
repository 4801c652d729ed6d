"""The rows one rank trains on: its partition's features, labels, masks and plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from supergcn.data.digests import file_digest
from supergcn.data.graph import read_graph_meta
from supergcn.errors import wrong_world_size
from supergcn.partition.rows import load_rank_rows
from supergcn.partition.store import read_partition_manifest
from supergcn.plan.rank_plan import RankPlan
from supergcn.plan.store import RANK_HASHES_FILE, check_plan_file, load_rank_plan, read_plan_manifest
from supergcn.train.config import TrainConfig
from supergcn.train.finished import run_identity


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


def load_rank_data(config: TrainConfig, rank: int, world_size: int, bfloat16_features: bool = False) -> RankData:
    """Rank ``rank``'s rows of the graph, checked against its partition and plan; with
    ``bfloat16_features`` (a bf16 run's) its features in bfloat16, rounded to nearest even
    as they are read, a block at a time (never a whole float32 copy beside them).

    What a rank reads does not grow with the graph or the number of ranks beyond its own
    share: three small manifests, its plan file (which carries its nodes' original ids),
    its entries of the plan's and the rows' hash lists, and one contiguous slice of each
    node array the partition wrote in rank order (:mod:`supergcn.partition.rows`).

    Raises:
        SuperGCNError: the partition or plan belongs to another graph or partition, or the
            plan is for another number of ranks than ``world_size``.
    """
    meta, part_manifest, plan_manifest = read_manifests(config)
    if plan_manifest["num_ranks"] != world_size:
        raise wrong_world_size(f"plan {config.plan}", plan_manifest["num_ranks"], world_size)
    if rank == 0:  # the hash lists are P entries: one rank vouches for them, and a mismatch ends the job
        check_plan_file(config.plan, RANK_HASHES_FILE, plan_manifest)
    plan = load_rank_plan(config.plan, rank)
    stored_as = {"features": (np.dtype(np.int16), _into_bfloat16)} if bfloat16_features else {}
    rows = {name: torch.from_numpy(values) for name, values in
            load_rank_rows(config.partition, rank, plan.offset, plan.num_owned, part_manifest, rank == 0,
                           stored_as).items()}
    if bfloat16_features:
        rows["features"] = rows["features"].view(torch.bfloat16)
    plan_hash = file_digest(Path(config.plan) / "plan.json")
    return RankData(x=rows["features"], y=rows["labels"], train_mask=rows["train_mask"],
                    val_mask=rows["val_mask"], test_mask=rows["test_mask"], owned_old_ids=plan.owned_old_ids,
                    plan=plan, graph_name=meta["name"], strategy=plan_manifest["strategy"],
                    num_classes=meta["num_classes"],
                    hashes=input_hashes(meta, part_manifest, plan_hash))


def _into_bfloat16(block: np.ndarray, into: np.ndarray) -> None:
    """float32 rows written into ``into`` (int16) as the bits of their bfloat16, rounded as
    torch rounds them (to nearest even), with no temporary."""
    torch.from_numpy(into).view(torch.bfloat16).copy_(torch.from_numpy(block))


def read_manifests(config: TrainConfig) -> tuple[dict, dict, dict]:
    """The graph's, the partition's and the plan's manifests, each checked to be of the one
    before it.

    Raises:
        SuperGCNError: one is missing, or belongs to another graph or partition.
    """
    meta = read_graph_meta(config.graph)
    part_manifest = read_partition_manifest(config.partition, meta["hash"])
    return meta, part_manifest, read_plan_manifest(config.plan, meta["hash"], part_manifest["partition_hash"])


def input_hashes(meta: dict, part_manifest: dict, plan_hash: str) -> dict:
    """The hashes of a run's inputs, by name, as its metrics header and trajectory fingerprint record them."""
    return {"graph_hash": meta["hash"], "partition_hash": part_manifest["partition_hash"], "plan_hash": plan_hash}


def kept_run_identity(config: TrainConfig) -> tuple[str, int]:
    """(identity, rank count) of the run ``config`` describes, from its inputs' manifests
    alone (no rank needed): what a kept finished run must match
    (:func:`supergcn.train.finished.run_identity`)."""
    meta, part_manifest, plan_manifest = read_manifests(config)
    hashes = input_hashes(meta, part_manifest, file_digest(Path(config.plan) / "plan.json"))
    return run_identity(config, config.trajectory_fingerprint(hashes)), plan_manifest["num_ranks"]
