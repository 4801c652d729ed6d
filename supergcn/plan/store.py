"""A plan directory: what the builder writes, and what every reader checks.

A plan directory holds ``plan.json`` (totals: its size does not grow with P),
``pairs.npz`` (per pair of ranks with cut edges, :mod:`supergcn.plan.statistics`),
``rank_hashes.npy`` (one hash per rank file) and one ``rank_NNNNN.npz`` per rank, so that
a training rank reads O(1) bytes besides its own file. ``plan.json`` records the hashes
of ``rank_hashes.npy`` and ``pairs.npz``, so it vouches for every file of the plan.
"""

from __future__ import annotations

import io
import time
from dataclasses import fields
from pathlib import Path

import numpy as np

from supergcn.data.digests import bytes_digest, file_digest
from supergcn.data.graph import Graph
from supergcn.data.storage import atomic_output_dir, load_array, peak_memory_mib, read_json, write_json
from supergcn.errors import SuperGCNError
from supergcn.partition.partition import Partition
from supergcn.plan.builder import plan_ranks
from supergcn.plan.rank_plan import RankPlan
from supergcn.plan.statistics import strategy_rows

#: Version 3 keeps per-pair statistics and rank-file hashes in arrays beside ``plan.json``
#: and the owned nodes' original ids in each rank file.
PLAN_FORMAT = "supergcn-plan/3"
#: The manifest of a plan directory.
PLAN_MANIFEST = "plan.json"
PAIRS_FILE = "pairs.npz"
#: One hash per rank file, in rank order.
RANK_HASHES_FILE = "rank_hashes.npy"


def _rank_file(directory: Path, rank: int) -> Path:
    return directory / f"rank_{rank:05d}.npz"


_HASH_BYTES = 16


def _write_rank_file(directory: Path, plan: RankPlan, hashes: np.ndarray) -> None:
    path = _rank_file(directory, plan.rank)
    np.savez(path, **{f.name: getattr(plan, f.name) for f in fields(RankPlan)})
    hashes[plan.rank] = file_digest(path, _HASH_BYTES)


def _write_plan_index(directory: Path, totals: dict, hashes: np.ndarray, graph_hash: str, partition_hash: str,
                      seconds: float) -> dict:
    """``rank_hashes.npy`` and ``plan.json`` (with the hashes of it and of ``pairs.npz``,
    so that it vouches for every file of the plan) beside the rank files; the manifest."""
    np.save(directory / RANK_HASHES_FILE, hashes)
    file_hashes = {name: file_digest(directory / name, _HASH_BYTES) for name in (RANK_HASHES_FILE, PAIRS_FILE)}
    manifest = {"format": PLAN_FORMAT, "graph_hash": graph_hash, "partition_hash": partition_hash,
                **totals, "seconds": seconds, "peak_memory_mib": peak_memory_mib(), "file_hashes": file_hashes}
    write_json(directory / "plan.json", manifest)
    return manifest


def _empty_hashes(num_ranks: int) -> np.ndarray:
    return np.empty(num_ranks, dtype=f"S{2 * _HASH_BYTES}")


def read_plan_manifest(directory: str | Path, graph_hash: str | None = None,
                       partition_hash: str | None = None) -> dict:
    """plan.json, refusing a plan built from another graph or partition.

    Args:
        directory: a plan directory.
        graph_hash: the hash of the graph it must have been built from; None checks none.
        partition_hash: the hash of the partition it must have been built from; None
            checks none.

    Returns:
        The parsed manifest.

    Raises:
        SuperGCNError: ``plan.json`` is missing, damaged, of another format, or of another
            graph or partition.
    """
    directory = Path(directory)
    manifest = read_json(directory / "plan.json", "plan")
    if manifest.get("format") != PLAN_FORMAT:
        raise SuperGCNError(f"{directory} is not a plan of this supergcn version (format {manifest.get('format')!r}, "
                            f"expected {PLAN_FORMAT!r})", "rerun `supergcn plan`")
    for what, expected, key in (("graph", graph_hash, "graph_hash"), ("partition", partition_hash, "partition_hash")):
        if expected is not None and manifest[key] != expected:
            raise SuperGCNError(f"plan {directory} was built from a different {what} ({key} {manifest[key]}, "
                                f"expected {expected})", f"rerun `supergcn plan` with this {what}")
    return manifest


def read_plan_pairs(directory: str | Path) -> dict[str, np.ndarray]:
    """A plan's per-pair statistics (:func:`~supergcn.plan.builder.plan_ranks`), one array entry per pair with cut
    edges, checked against the hash ``plan.json`` records for them.

    Args:
        directory: a plan directory.

    Returns:
        Statistic name (:data:`~supergcn.plan.statistics.PAIR_STATISTICS`, and ``cover``
        and ``matching`` for hybrid) -> one value per pair.

    Raises:
        SuperGCNError: the manifest or ``pairs.npz`` is missing, damaged or not the file
            the manifest vouches for.
    """
    directory = Path(directory)
    check_plan_file(directory, PAIRS_FILE)
    arrays = load_array(directory, PAIRS_FILE.removesuffix(".npz"), "plan", suffix=".npz")
    with arrays:
        return {name: arrays[name] for name in arrays.files}


def check_plan_file(directory: str | Path, name: str, manifest: dict | None = None) -> None:
    """Refuse ``rank_hashes.npy`` or ``pairs.npz`` unless it is the file ``plan.json`` was
    written with (one rank checks the hash list, whose size grows with P).

    Args:
        directory: a plan directory.
        name: ``rank_hashes.npy`` or ``pairs.npz``.
        manifest: the plan's manifest, read from ``directory`` when None.

    Raises:
        SuperGCNError: the file is missing or its hash is not the one recorded (or the
            manifest cannot be read).
    """
    directory = Path(directory)
    manifest = read_plan_manifest(directory) if manifest is None else manifest
    path = directory / name
    if not path.is_file():
        raise SuperGCNError(f"plan {directory} is incomplete: {name} is missing", "rerun `supergcn plan`")
    if manifest["file_hashes"].get(name) != file_digest(path, _HASH_BYTES):
        raise SuperGCNError(f"{path} does not match the hash plan.json records for it (damaged, truncated or from "
                            "another plan)", "delete the plan directory and rerun `supergcn plan`")


def load_rank_plan(directory: str | Path, rank: int) -> RankPlan:
    """Rank ``rank``'s :class:`RankPlan` from a plan directory written by :func:`run_plan`,
    checked against the hash recorded for it. Reads the rank's own file and its entry of
    ``rank_hashes.npy``, nothing that grows with the number of ranks.

    Args:
        directory: a plan directory.
        rank: the rank, 0..P-1.

    Returns:
        The rank's plan.

    Raises:
        SuperGCNError: the rank file is missing, its hash is not the recorded one, it lacks
            an array, it is another rank's, or it contradicts itself
            (:meth:`~supergcn.plan.rank_plan.RankPlan.contradiction`).
    """
    directory = Path(directory)
    path = _rank_file(directory, rank)
    if not path.is_file():
        raise SuperGCNError(f"plan file {path} is missing", "rerun `supergcn plan`")
    hashes = load_array(directory, RANK_HASHES_FILE.removesuffix(".npy"), "plan", mmap=True)
    data = path.read_bytes()
    if rank >= len(hashes) or hashes[rank].decode() != bytes_digest(data, _HASH_BYTES):
        raise SuperGCNError(f"plan file {path} does not match the hash {RANK_HASHES_FILE} records for it (damaged, "
                            "truncated or from another plan)", "delete the plan directory and rerun `supergcn plan`")
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        missing = [f.name for f in fields(RankPlan) if f.name not in arrays.files]
        if missing:
            raise SuperGCNError(f"plan file {path} lacks {', '.join(missing)}", "rerun `supergcn plan`")
        values = {f.name: arrays[f.name] for f in fields(RankPlan)}
    for scalar in ("rank", "num_ranks", "offset"):
        values[scalar] = int(values[scalar])
    plan = RankPlan(**values)
    problem = f"it is the plan of rank {plan.rank}" if plan.rank != rank else plan.contradiction()
    if problem is not None:
        raise SuperGCNError(f"plan file {path} contradicts itself: {problem}",
                            "delete the plan directory and rerun `supergcn plan`")
    return plan


def plan_strategy_rows(directory: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """A plan directory's manifest and its :func:`strategy_rows`.

    Args:
        directory: a plan directory.

    Returns:
        ``(manifest, rows)``: ``rows`` maps ``pre``, ``post`` and the plan's strategy to
        their P x P matrices of rows sent.

    Raises:
        SuperGCNError: the manifest or ``pairs.npz`` cannot be read or trusted.
    """
    manifest = read_plan_manifest(directory)
    return manifest, strategy_rows(read_plan_pairs(directory), manifest["num_ranks"], manifest["strategy"])


def run_plan(graph: Graph, graph_hash: str, partition: Partition, partition_hash: str, strategy: str,
             out_dir, row_costs: tuple[int, int] | None = None) -> dict:
    """Build every rank's plan (:func:`supergcn.plan.builder.plan_ranks`), writing each as it
    is built, into ``out_dir``.

    Args:
        graph: the prepared graph.
        graph_hash: its content hash, recorded in the manifest.
        partition: its partition.
        partition_hash: that partition's hash, recorded in the manifest.
        strategy: ``pre``, ``post`` or ``hybrid``.
        out_dir: the plan directory to write (replaced atomically).
        row_costs: hybrid only: the costs of a PRE and a POST row to find the cheapest
            cover under (:func:`~supergcn.plan.builder.plan_ranks`); None for the fewest rows.

    Returns:
        The manifest written as ``plan.json``.

    Raises:
        SuperGCNError: an unknown strategy, a pair with more cut edges than one matching
            can index, a neighbour id outside the graph, an unwritable ``out_dir``, or a
            full disk.
    """
    started = time.perf_counter()
    with atomic_output_dir(out_dir, PLAN_MANIFEST) as staging:
        hashes = _empty_hashes(partition.num_parts)
        scratch = staging / ".scratch"
        scratch.mkdir()
        totals = plan_ranks(graph, partition, strategy, scratch, lambda plan: _write_rank_file(staging, plan, hashes),
                            staging / PAIRS_FILE, row_costs)
        scratch.rmdir()
        return _write_plan_index(staging, totals, hashes, graph_hash, partition_hash, time.perf_counter() - started)
