"""Result tables of the pipeline's steps rather than its runs (written beside the run tables
of :mod:`supergcn.report.tables`):

* ``volume`` — bytes one layer exchanges at the hidden width under pre / post / hybrid
  and hybrid + Int2, data and parameters separately and together (Table 5);
* ``preprocessing`` — each preprocessing step's seconds and peak memory, from the
  manifests the steps write.

What every column means, in which unit: :mod:`supergcn.report.columns`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from supergcn.data.graph import read_graph_meta
from supergcn.errors import SuperGCNError
from supergcn.kernels.wire import layer_bytes
from supergcn.partition.store import read_partition_manifest
from supergcn.plan.store import plan_strategy_rows, read_plan_manifest


def volume_table(plans: list[tuple[str, str | Path]], widths: Mapping[str, int]) -> pd.DataFrame:
    """Bytes of one layer's exchange for every (dataset, plan), at the dataset's hidden
    width ``widths[dataset]`` (its own in a study that sets widths per dataset).

    Args:
        plans: (dataset, plan directory) pairs.
        widths: dataset -> hidden width.

    Returns:
        One row per dataset and P: ``pre_bytes``, ``post_bytes`` and, from a hybrid plan,
        ``hybrid_bytes``, Int2's data and parameter bytes and their sum, and the
        reductions: min(pre, post) / hybrid and hybrid / hybrid Int2 (parameters included).

    Raises:
        SuperGCNError: a plan's manifest or pair statistics cannot be read or trusted.
    """
    records = {}
    for dataset, directory in plans:
        manifest, rows = plan_strategy_rows(directory)
        key = (dataset, manifest["num_ranks"])
        width = widths[dataset]
        row = records.setdefault(key, {"dataset": dataset, "P": manifest["num_ranks"], "hidden": width})
        row["pre_bytes"] = layer_bytes(rows["pre"], width, 32)[0]
        row["post_bytes"] = layer_bytes(rows["post"], width, 32)[0]
        if manifest["strategy"] == "hybrid":
            hybrid_rows = rows["hybrid"]
            row["hybrid_bytes"] = layer_bytes(hybrid_rows, width, 32)[0]
            data, parameters = layer_bytes(hybrid_rows, width, 2)
            row.update(hybrid_int2_data_bytes=data, hybrid_int2_param_bytes=parameters,
                       hybrid_int2_bytes=data + parameters)
    table = pd.DataFrame.from_records(list(records.values())).sort_values(["dataset", "P"]).reset_index(drop=True)
    if "hybrid_bytes" in table:
        best_single = table[["pre_bytes", "post_bytes"]].min(axis=1)
        table["hybrid_reduction"] = best_single / table["hybrid_bytes"].replace(0, np.nan)
        # What travels: the parameters are a message of their own (4 B a row against F / 4).
        table["int2_reduction"] = table["hybrid_bytes"] / table["hybrid_int2_bytes"].replace(0, np.nan)
    return table


#: The fewest directed adjacency entries at which the preprocessing table divides a step's
#: peak memory by them. Below it the process's own memory (the interpreter, NumPy, torch and
#: numba loaded: 0.3-0.5 GiB) is a large share of the peak, and the quotient says more about
#: the interpreter than about the step: 240,000 entries at 1.2 GiB read as 5,000 B an entry.
#: From 50 M entries a step that holds even 10 B an entry (0.5 GB) outweighs that baseline.
ENTRIES_FOR_BYTES_PER_ENTRY = 50_000_000


def preprocessing_table(graph_dirs, partition_dirs, plan_dirs) -> pd.DataFrame:
    """Seconds and peak memory of each preprocessing step, from the manifests the steps
    write (peak resident memory of the step's own process, ``VmHWM``), per dataset and P,
    with the peak per adjacency entry of the graph (directed CSR entries) where the graph
    has at least :data:`ENTRIES_FOR_BYTES_PER_ENTRY` of them; partitions add their edge cut
    and the max/mean imbalance of each constraint.

    Args:
        graph_dirs: prepared graph directories.
        partition_dirs: partition directories of those graphs.
        plan_dirs: plan directories of those graphs.

    Returns:
        One row per step, sorted by dataset, P and step.

    Raises:
        SuperGCNError: a manifest cannot be read, or a partition or plan belongs to none
            of the graphs.
    """
    graphs = {}
    records = []
    for directory in graph_dirs:
        meta = read_graph_meta(directory)
        graphs[meta["hash"]] = meta
        records.append({"hash": meta["hash"], "P": None, "step": "prepare",
                        "seconds": meta["seconds"]["prepare"], "peak_mib": meta.get("peak_memory_mib")})
    for directory in partition_dirs:
        manifest = read_partition_manifest(directory)
        records.append({"hash": manifest["graph_hash"], "P": manifest["num_parts"],
                        "step": f"partition ({manifest['engine']['name']})", "seconds": manifest["seconds"],
                        "peak_mib": manifest["peak_memory_mib"], "edge_cut": manifest["edge_cut"],
                        **{f"imbalance_{name}": value["imbalance_max_over_mean"]
                           for name, value in manifest["balance"].items()}})
    for directory in plan_dirs:
        manifest = read_plan_manifest(directory)
        records.append({"hash": manifest["graph_hash"], "P": manifest["num_ranks"],
                        "step": f"plan ({manifest['strategy']})", "seconds": manifest["seconds"],
                        "peak_mib": manifest["peak_memory_mib"]})
    rows = []
    for record in records:
        meta = graphs.get(record.pop("hash"))
        if meta is None:
            raise SuperGCNError(f"a partition or plan of the preprocessing table ({record['step']}, "
                                f"P={record['P']}) belongs to none of its graphs", "pass the graph it was built from")
        peak = record.pop("peak_mib")
        rows.append({"dataset": meta["name"], **record, "adjacency_entries": meta["num_edges_directed"],
                     "peak_gib": None if peak is None else peak / 1024,
                     "bytes_per_entry": None if peak is None or meta["num_edges_directed"] < ENTRIES_FOR_BYTES_PER_ENTRY
                     else peak * 2**20 / meta["num_edges_directed"]})
    table = pd.DataFrame.from_records(rows)
    for column in ("P", "edge_cut"):  # counts with gaps: integers, not floats
        if column in table:
            table[column] = table[column].astype("Int64")
    return table.sort_values(["dataset", "P", "step"], na_position="first", kind="stable").reset_index(drop=True)
