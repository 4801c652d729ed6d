"""Running a partition engine, and the partition directory it writes and readers check.

A partition directory holds ``parts.npy`` (a part id per node, original ids),
``part_totals.npz`` (per part: nodes, edges, training nodes), the node arrays in rank
order (:mod:`supergcn.partition.rows`) and ``partition.json``: the graph's and the
partition's hashes, the engine as it ran, the edge cut, the balance of each constraint,
seconds and peak memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from supergcn.data.graph import Graph
from supergcn.data.storage import atomic_output_dir, load_array, peak_memory_mib, read_json, write_json
from supergcn.errors import SuperGCNError
from supergcn.naming import PARTITION_ENGINES
from supergcn.partition.config import PartitionConfig, default, engine_problems
from supergcn.partition.kaminpar import kaminpar_partition, preset_for
from supergcn.partition.metis import partition_graph
from supergcn.partition.partition import Partition, balance_report, edge_cut, part_totals
from supergcn.partition.rcm import rcm_partition
from supergcn.partition.rows import write_rank_rows

#: Version 2 keeps the per-part totals in ``part_totals.npz`` and records the engine;
#: version 3 adds the node arrays in rank order (:mod:`supergcn.partition.rows`).
PARTITION_FORMAT = "supergcn-partition/3"
#: The manifest of a partition directory.
PARTITION_MANIFEST = "partition.json"
_TOTALS_FILE = "part_totals.npz"


def read_part_totals(directory: str | Path) -> dict[str, np.ndarray]:
    """A partition directory's :func:`part_totals`, as written beside ``parts.npy``.

    Args:
        directory: a partition directory.

    Returns:
        ``nodes``, ``edges`` and ``train_nodes`` -> totals per part.

    Raises:
        SuperGCNError: ``part_totals.npz`` is missing or damaged.
    """
    with load_array(Path(directory), _TOTALS_FILE.removesuffix(".npz"), "partition", suffix=".npz") as arrays:
        return {name: arrays[name] for name in arrays.files}


#: The partition option each field of :class:`Engine` holds.
_OPTION_OF = {"name": "engine", "threads": "threads", "preset": "kaminpar_preset",
              "large_k_preset": "kaminpar_large_k_preset", "separate_constraints": "separate_constraints"}


@dataclass(frozen=True)
class Engine:
    """Which partitioner runs and how: ``metis`` (pymetis, one thread), ``kaminpar``
    (:mod:`supergcn.partition.kaminpar`, ``threads`` threads, ``preset`` up to k =
    :data:`~supergcn.partition.config.LARGE_K` and ``large_k_preset`` beyond) or ``rcm``
    (:mod:`supergcn.partition.rcm`, one thread). The defaults are those of
    :class:`~supergcn.partition.config.PartitionConfig`.

    Args:
        name: ``metis``, ``kaminpar`` or ``rcm`` (:data:`supergcn.naming.PARTITION_ENGINES`).
        threads: KaMinPar's threads.
        preset: KaMinPar's preset up to :data:`~supergcn.partition.config.LARGE_K` parts.
        large_k_preset: KaMinPar's preset beyond.
        separate_constraints: balance each constraint on its own (True) or their combined
            weight (False); None, the default, takes the engine's own: separate for METIS,
            combined for KaMinPar, which balances one weight.
    """

    name: str = default(_OPTION_OF["name"])
    threads: int = default(_OPTION_OF["threads"])
    preset: str = default(_OPTION_OF["preset"])
    large_k_preset: str = default(_OPTION_OF["large_k_preset"])
    separate_constraints: bool | None = default(_OPTION_OF["separate_constraints"])

    @classmethod
    def of(cls, config: PartitionConfig) -> Engine:
        """The engine ``config`` asks for.

        Args:
            config: the partition options.

        Returns:
            Its engine, threads, presets and choice of separate constraints.
        """
        return cls(**{field: getattr(config, name) for field, name in _OPTION_OF.items()})

    def options(self) -> dict:
        """The engine as the partition options it stands for (the inverse of :meth:`of`).

        Returns:
            Option name (:class:`~supergcn.partition.config.PartitionConfig`) -> value.
        """
        return {name: getattr(self, field) for field, name in _OPTION_OF.items()}

    @property
    def separate(self) -> bool:
        """Whether the constraints are balanced each on its own."""
        return self.name == "metis" if self.separate_constraints is None else self.separate_constraints

    def describe(self, num_parts: int, constraints=default("constraints")) -> dict:
        """The manifest's record of the engine as it ran for ``num_parts``.

        Args:
            num_parts: the number of parts, P.
            constraints: the constraints balanced.

        Returns:
            ``name`` and, for more than one part, ``method`` and ``threads`` (and KaMinPar's
            ``preset``).
        """
        if num_parts == 1:
            return {"name": "single part"}
        if self.name == "rcm":
            return {"name": "rcm", "method": "equal row ranges of the reverse Cuthill-McKee order", "threads": 1}
        if self.name == "metis" and self.separate and constraints:
            return {"name": "metis", "method": "METIS library k-way, one constraint per weight", "threads": 1}
        if self.name == "metis":
            return {"name": "metis", "method": "pymetis k-way, combined vertex weight", "threads": 1}
        return {"name": "kaminpar", "method": "KaMinPar, combined vertex weight capped at a part's share",
                "threads": self.threads,
                "preset": preset_for(num_parts, self.preset, self.large_k_preset)}


def save_partition(partition: Partition, graph: Graph, graph_hash: str, out_dir: str | Path,
                   constraints, seconds: float, edge_fraction: float = 1.0, engine: Engine = Engine(),
                   empty_parts_filled: int = 0, engine_peak_mib: float = 0.0) -> dict:
    """Write a partition directory atomically (module docstring): the parts, the per-part
    totals, the node arrays in rank order and the manifest.

    Args:
        partition: the partition.
        graph: the graph partitioned.
        graph_hash: its content hash, recorded so readers can refuse another graph's.
        out_dir: the partition directory (replaced if it exists).
        constraints: the constraints balanced.
        seconds: how long partitioning took.
        edge_fraction: the share of the edges METIS saw.
        engine: the engine that ran.
        empty_parts_filled: parts the engine left empty and were given a node.
        engine_peak_mib: where the engine ran in a process of its own (KaMinPar), the
            step's peak memory meanwhile (that process's and this one's): the manifest's
            ``peak_memory_mib`` is the larger of it and this process's own peak.

    Returns:
        The manifest written as ``partition.json``.

    Raises:
        SuperGCNError: ``out_dir`` cannot be written, or the disk filled.
    """
    totals = part_totals(graph, partition)
    described = engine.describe(partition.num_parts, constraints)
    if empty_parts_filled:
        described["empty_parts_filled"] = empty_parts_filled
    manifest = {
        "format": PARTITION_FORMAT,
        "graph": graph.name,
        "graph_hash": graph_hash,
        "num_parts": partition.num_parts,
        "engine": described,
        "constraints": list(constraints),
        "metis_edge_fraction": edge_fraction if engine.name == "metis" else None,
        "edge_cut": edge_cut(graph, partition.parts),
        "num_edges_undirected": graph.num_undirected_edges,
        "balance": balance_report(totals),
        "partition_hash": partition.content_hash(),
        "seconds": seconds,
    }
    with atomic_output_dir(out_dir, PARTITION_MANIFEST) as staging:
        np.save(staging / "parts.npy", partition.parts)
        np.savez(staging / _TOTALS_FILE, **totals)
        manifest["row_hashes_hash"] = write_rank_rows(graph, partition.offsets, partition.new_to_old, staging)
        manifest["peak_memory_mib"] = max(peak_memory_mib(), engine_peak_mib)
        write_json(staging / "partition.json", manifest)
    return manifest


def read_partition_manifest(directory: str | Path, graph_hash: str | None = None) -> dict:
    """``partition.json`` (a few hundred bytes whatever P), refusing a partition of another
    format or, when ``graph_hash`` is given, of another graph.

    Args:
        directory: a partition directory.
        graph_hash: the hash of the graph it must have been built from; None checks none.

    Returns:
        The parsed manifest.

    Raises:
        SuperGCNError: the manifest is missing, damaged, of another format, or of another
            graph.
    """
    directory = Path(directory)
    manifest = read_json(directory / "partition.json", "partition")
    if manifest.get("format") != PARTITION_FORMAT:
        raise SuperGCNError(f"{directory} is not a partition of this supergcn version "
                            f"(format {manifest.get('format')!r}, expected {PARTITION_FORMAT!r})",
                            "rerun `supergcn partition`")
    if graph_hash is not None and manifest["graph_hash"] != graph_hash:
        raise SuperGCNError(f"partition {directory} was built from a different graph (hash {manifest['graph_hash']}, "
                            f"graph has {graph_hash})", "rerun `supergcn partition` on this graph")
    return manifest


def load_partition(directory: str | Path, graph_hash: str | None = None,
                   num_nodes: int | None = None) -> tuple[Partition, dict]:
    """Load a partition, refusing one built from a different graph when ``graph_hash`` is
    given, and one whose part ids do not fit it: not one per node (of ``num_nodes``, when
    given), outside 0..P-1, or leaving a part empty (a manifest rewritten to match).

    Args:
        directory: a partition directory.
        graph_hash: the hash of the graph it must have been built from; None checks none.
        num_nodes: the nodes of that graph; None checks no length.

    Returns:
        ``(partition, manifest)``.

    Raises:
        SuperGCNError: the manifest or ``parts.npy`` is missing, damaged or of another
            format or graph, the parts do not match the manifest's hash, or they do not fit
            the graph.
    """
    directory = Path(directory)
    manifest = read_partition_manifest(directory, graph_hash)
    partition = Partition(load_array(directory, "parts", "partition"), manifest["num_parts"])
    if partition.content_hash() != manifest["partition_hash"]:
        raise SuperGCNError(f"{directory}/parts.npy does not match its manifest (modified or damaged)",
                            "rerun `supergcn partition`")
    parts, num_parts = partition.parts, partition.num_parts
    problem = None
    if parts.ndim != 1 or parts.dtype.kind not in "iu":
        problem = f"is {parts.dtype}{list(parts.shape)}, not one integer part id per node"
    elif num_nodes is not None and len(parts) != num_nodes:
        problem = f"holds {len(parts):,} part ids for a graph of {num_nodes:,} nodes"
    elif len(parts) and (int(parts.min()) < 0 or int(parts.max()) >= num_parts):
        problem = f"holds part ids from {int(parts.min())} to {int(parts.max())}, outside 0..{num_parts - 1}"
    elif (partition.sizes == 0).any():
        problem = f"leaves {int((partition.sizes == 0).sum())} of its {num_parts} parts empty"
    if problem is not None:
        raise SuperGCNError(f"{directory}/parts.npy {problem}: the partition contradicts its manifest or its graph",
                            "delete the partition directory and rerun `supergcn partition`")
    return partition, manifest


def run_partition(graph: Graph, graph_hash: str, num_parts: int, out_dir, constraints=default("constraints"),
                  seed: int = default("seed"), edge_fraction: float = default("edge_fraction"),
                  engine: Engine = Engine()) -> dict:
    """Partition ``graph`` with ``engine`` and write ``out_dir`` atomically (the defaults:
    :class:`~supergcn.partition.config.PartitionConfig`'s).

    Args:
        graph: the prepared graph.
        graph_hash: its content hash, recorded in the manifest.
        num_parts: the number of parts, P.
        out_dir: the partition directory (replaced if it exists).
        constraints: the vertex weights to balance
            (:data:`supergcn.naming.PARTITION_CONSTRAINTS`).
        seed: the engine's random seed.
        edge_fraction: the share of the edges METIS sees (:func:`~supergcn.partition.metis.partition_graph`).
        engine: which partitioner runs, and how.

    Returns:
        The manifest written as ``partition.json``: graph hash, partition hash, the engine
        (and its preset and threads), the edge fraction METIS saw, edge cut (of the whole
        graph), the imbalance of nodes / edges / training nodes (their per-part totals are
        in ``part_totals.npz``), seconds, peak memory.

    Raises:
        SuperGCNError: an unknown engine, an option the engine does not take
            (:data:`~supergcn.partition.config.ENGINE_LIMITS`: KaMinPar keeps no
            constraints separate and sees every edge; RCM balances the vertex count alone,
            has no seed and sees every edge), or what the engine and
            :func:`save_partition` raise (P out of range, an unknown constraint, an empty
            part, an unwritable ``out_dir``).
    """
    started = time.perf_counter()
    problems = engine_problems(PartitionConfig(tuple(constraints), seed, edge_fraction=edge_fraction,
                                               **engine.options()))
    if problems:
        raise SuperGCNError("; ".join(problems))
    filled, engine_peak_mib = 0, 0.0
    if engine.name == "metis" or num_parts == 1:
        partition = partition_graph(graph, num_parts, constraints, seed, edge_fraction, engine.separate)
    elif engine.name == "rcm":
        partition = rcm_partition(graph, num_parts)
    elif engine.name == "kaminpar":
        partition, filled, engine_peak_mib = kaminpar_partition(graph, num_parts, constraints, seed, engine.threads,
                                               preset_for(num_parts, engine.preset, engine.large_k_preset),
                                               Path(out_dir))
    else:
        raise SuperGCNError(f"unknown partition engine {engine.name!r}",
                            f"choose one of {', '.join(PARTITION_ENGINES)}")
    return save_partition(partition, graph, graph_hash, out_dir, constraints, time.perf_counter() - started,
                          edge_fraction, engine, filled, engine_peak_mib)
