"""The metrics file of a training run: JSON lines written by rank 0, and its reader.

Lines, in order:

* ``header`` — the file's format (:data:`METRICS_FORMAT`), config, dataset, strategy, P,
  threads, hosts, the CPUs each host lets its ranks run on and whether its ranks × threads
  outnumber them (``cores_by_host``, ``oversubscribed``:
  :func:`supergcn.train.provenance.oversubscribed`; absent from files written before they
  were recorded, which read as unknown), the memory allocator of every rank (:mod:`supergcn.train.allocator`),
  the MPI settings the ranks started with
  (:data:`supergcn.distributed.comm.MPICH_SETTINGS`), what the aggregation kernels were
  built for (:func:`supergcn.kernels.simd.kernel_target`: CPU, vector features, SVE length,
  vector width), versions, git commit and the graph / partition / plan hashes;
* one ``epoch`` line per epoch — loss, accuracies, seconds per phase per rank, each
  phase's max over ranks, the phases of the slowest rank (which add up to the epoch
  time), each rank's CPU seconds in user and system mode (``cpu_user``, ``cpu_system``:
  all its threads), and bytes sent and received; and a compared method's own entries
  (:meth:`~supergcn.distributed.protocol.RankMethod.end_epoch`): after an epoch traced for
  AdaQP's bit widths, ``bit_assignment`` (the re-assignment's wall time and, per exchange,
  the rows at each width, the rows without spread, the solver's objective and seconds), and
  DistGNN-MB's ``minibatch`` (:func:`supergcn.methods.distgnn_mb.training.minibatch_record`);
* ``summary`` — epochs, mean epoch time (every process's first epoch excluded, ``warm_up``
  in its record), best validation accuracy
  and the test accuracy at it, the lowest validation loss and the test accuracy at it
  (upstream's model selection), final accuracies, every rank's parameter hash and every
  rank's peak resident memory (bytes, the process's high-water mark).

The file is written in one piece when the run has finished (the records of an
interrupted run live in its checkpoint), so a killed or failed run leaves nothing that
looks like a result; rank 0 prints one progress line per epoch meanwhile.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from supergcn.data.storage import peak_memory_mib, write_text
from supergcn.distributed.comm import MPICH_SETTINGS
from supergcn.distributed.timing import BREAKDOWN, DETAIL
from supergcn.errors import SuperGCNError
from supergcn.train.allocator import allocator_in_use
from supergcn.train.provenance import git_commit, host, oversubscribed, package_versions

#: The metrics file's format, in its header: a reader refuses any other (bumped when a record
#: changes in a way the readers depend on; a field added that readers take as unknown where
#: it is absent, as ``oversubscribed``, keeps it).
METRICS_FORMAT = "supergcn-metrics/1"
#: Per-rank CPU seconds of an epoch (all threads), beside the wall-clock phases.
CPU_TIMES = ("cpu_user", "cpu_system")
#: Every time an epoch records per rank (the paper's categories repeat some phases).
RECORDED_TIMES = tuple(dict.fromkeys((*DETAIL, *BREAKDOWN, *CPU_TIMES, "total")))


def run_header(comm, config_json: dict, dataset: str, strategy: str, threads: int, hashes: dict,
               kernels: dict, precision: dict | None = None) -> dict | None:
    """The header line (collective: hosts and CPUs are gathered; rank 0 gets it, the others None);
    ``kernels`` is :func:`supergcn.kernels.simd.kernel_target` (passed in, so that readers
    of metrics files do not import the kernels).

    Args:
        comm: the job's MPI communicator.
        config_json: the run's options (:meth:`TrainConfig.as_json
            <supergcn.train.config.TrainConfig.as_json>`).
        dataset: the graph's name.
        strategy: the plan's strategy.
        threads: threads per rank.
        hashes: the input hashes, by name.
        kernels: what the kernels were built for.
        precision: what the run computes in, as picked (:meth:`supergcn.train.precision.Precision.as_json`).

    Returns:
        The header record on rank 0, None on the others.
    """
    hosts = comm.gather(host(), root=0)
    cores = oversubscribed(comm, threads)
    allocators = comm.gather(allocator_in_use(), root=0)
    if comm.Get_rank() != 0:  # versions and the git commit are looked up once, not P times
        return None
    return {"type": "header", "format": METRICS_FORMAT, "config": config_json, "dataset": dataset, "strategy": strategy,
            "num_ranks": comm.Get_size(), "threads_per_rank": threads, "hosts": hosts,
            "cores_by_host": cores["cores_by_host"], "oversubscribed": cores["oversubscribed"],
            "allocator": allocators[0], "allocator_per_rank": [a["name"] for a in allocators],
            "mpi_environment": {name: os.environ.get(name) for name in MPICH_SETTINGS},
            "kernels": kernels, "precision": precision,
            "versions": package_versions(), "git_commit": git_commit(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **hashes}


def epoch_record(comm, epoch: int, loss: float, seconds: dict, traffic: dict, accuracy: dict,
                 allreduce_bytes: int, warm_up: bool) -> dict | None:
    """One epoch's line (collective: rank 0 gets it, the others None).

    ``seconds`` is this rank's :meth:`~supergcn.distributed.timing.PhaseTimer.breakdown`, ``traffic`` its bytes
    ``{"sent": {kind: per-peer array}, "received": {...}}``; ``warm_up`` marks the first
    epoch of a process, whose time the means leave out (:func:`timed_epochs`).

    Args:
        comm: the job's MPI communicator.
        epoch: the epoch, from 1.
        loss: the global loss.
        seconds: this rank's seconds per phase.
        traffic: this rank's bytes sent and received.
        accuracy: the global accuracies and validation loss.
        allreduce_bytes: bytes each rank all-reduces per epoch.
        warm_up: whether this is the process's first epoch.

    Returns:
        The epoch record on rank 0, None on the others.
    """
    per_rank = comm.gather(seconds, root=0)
    # Each rank sums its per-peer counts first: rank 0 gathers O(P) numbers, not P^2.
    traffic = comm.gather({"sent": {kind: int(counts.sum()) for kind, counts in traffic["sent"].items()},
                           "received": int(sum(counts.sum() for counts in traffic["received"].values()))}, root=0)
    if comm.Get_rank() != 0:
        return None
    slowest = max(per_rank, key=lambda r: r["total"])
    return {"type": "epoch", "epoch": epoch, "warm_up": warm_up, "loss": loss, **accuracy,
            "seconds": {"max": {k: max(r[k] for r in per_rank) for k in RECORDED_TIMES},
                        "slowest_rank": slowest, "per_rank": per_rank},
            "bytes": {"sent_total": sum(sum(t["sent"].values()) for t in traffic),
                      **{f"{kind}_sent_total": sum(t["sent"][kind] for t in traffic) for kind in traffic[0]["sent"]},
                      "sent_per_rank": [sum(t["sent"].values()) for t in traffic],
                      "received_per_rank": [t["received"] for t in traffic],
                      "allreduce_per_rank": allreduce_bytes}}


def peak_memory_bytes() -> int:
    """This rank's peak resident set size (:func:`~supergcn.data.storage.peak_memory_mib`).

    Returns:
        The peak in bytes.
    """
    return round(peak_memory_mib() * 2**20)


def summary_record(records: list[dict], best: dict, final_accuracy: dict, parameter_hashes: list[str],
                   peak_memory: list[int]) -> dict:
    """The summary line from the epoch records and the run's end state.

    Args:
        records: the epoch records, resumed ones included.
        best: the epochs of best validation accuracy and lowest validation loss.
        final_accuracy: the final evaluation's figures.
        parameter_hashes: every rank's parameter hash.
        peak_memory: every rank's peak resident memory, in bytes.

    Returns:
        The summary record.
    """
    return {"type": "summary", "epochs": len(records),
            "mean_epoch_seconds": float(np.mean([r["seconds"]["max"]["total"] for r in timed_epochs(records)])),
            "best_val_acc": best["val_acc"], "best_epoch": best["epoch"],
            "test_acc_at_best_val": best["test_acc"], "min_val_loss": best.get("val_loss"),
            "min_val_loss_epoch": best.get("val_loss_epoch"),
            "test_acc_at_min_val_loss": best.get("test_acc_at_val_loss"), "final": final_accuracy,
            "parameter_hash_per_rank": parameter_hashes, "identical_parameters": len(set(parameter_hashes)) == 1,
            "peak_memory_bytes_per_rank": peak_memory}


def run_line(config, strategy: str, ranks: int, compute: str = "fp32") -> str:
    """The first line a run prints (rank 0): the method it trains, as its paper names it
    (:func:`supergcn.variants.run_name`), the model, the plan, the exchange's precision,
    the compute's where it is not float32, label propagation and the ranks.

    Args:
        config: the run's :class:`~supergcn.train.config.TrainConfig`.
        strategy: its plan's strategy.
        ranks: P.
        compute: the precision the run computes in (:mod:`supergcn.train.precision`).

    Returns:
        ``training DistGNN (cd-5): GraphSAGE, pre plan, fp32 exchange, no label propagation, P = 4``.
    """
    from supergcn.models import card
    from supergcn.naming import precision_name
    from supergcn.variants import run_name

    values = {**config.values(), "strategy": strategy, "label_propagation": config.label_rate > 0}
    propagation = "label propagation" if values["label_propagation"] else "no label propagation"
    return (f"training {run_name(values)}: {card(config.model).title}, {strategy} plan, "
            f"{precision_name(config.bits)} exchange, {'' if compute == 'fp32' else f'{compute} compute, '}"
            f"{propagation}, P = {ranks}")


def print_progress(record: dict) -> None:
    """One line about a finished epoch on stdout (rank 0: the run's log shows how it goes).

    Args:
        record: an epoch record.
    """
    accuracy = " ".join(f"{name} {record[f'{name}_acc']:.4f}" for name in ("train", "val", "test")
                        if record.get(f"{name}_acc") is not None)
    print(f"epoch {record['epoch']}: loss {record['loss']:.4f} {accuracy} "
          f"({record['seconds']['max']['total']:.3f} s)", flush=True)


def write_metrics(out: str | Path, header: dict, records: list[dict], summary: dict) -> None:
    """The whole metrics file, in one piece (a temporary file and a rename) once the run
    has finished (rank 0).

    Args:
        out: the metrics file.
        header: the header record.
        records: the epoch records.
        summary: the summary record.

    Raises:
        SuperGCNError: ``out`` cannot be written, or the disk filled.
    """
    write_text(out, metrics_text(header, records, summary))


def metrics_text(header: dict, records: list[dict], summary: dict) -> str:
    """The metrics file's text: one JSON record a line, the header first, the summary last.

    Args:
        header: the header record.
        records: the epoch records.
        summary: the summary record.

    Returns:
        The text, ending in a newline.
    """
    return "".join(json.dumps(r) + "\n" for r in [header, *records, summary])


def timed_epochs(records: list[dict]) -> list[dict]:
    """The epochs whose time counts: all but the first epoch of every process (a resumed
    run starts a new one), which pay one-off costs (JIT loading, first allocations, the
    first exchanges); all of them if nothing else is left.

    Args:
        records: epoch records.

    Returns:
        Those records, in order.
    """
    return [r for i, r in enumerate(records) if i > 0 and not r.get("warm_up")] or records


def read_metrics(path: str | Path) -> tuple[dict, list[dict], dict]:
    """(header, epoch records, summary) of a finished run's metrics file.

    Args:
        path: a metrics file.

    Returns:
        ``(header, epochs, summary)``.

    Raises:
        SuperGCNError: the file is missing, holds a line that is not JSON, lacks the
            header or the summary line, or is of another format than :data:`METRICS_FORMAT`.
    """
    path = Path(path)
    if not path.is_file():
        raise SuperGCNError(f"metrics file {path} not found", "run its training job first")
    lines = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise SuperGCNError(f"metrics file {path} is damaged: line {number} is not JSON",
                                "delete it and rerun its training job") from None
        lines.append(record if isinstance(record, dict) else {})
    if not lines or lines[0].get("type") != "header" or lines[-1].get("type") != "summary":
        raise SuperGCNError(f"{path} is not a complete metrics file (a header line, epoch lines and a summary line)",
                            "delete it and rerun its training job")
    if lines[0].get("format") != METRICS_FORMAT:
        raise SuperGCNError(f"{path} is not a metrics file of this supergcn version (format "
                            f"{lines[0].get('format')!r}, expected {METRICS_FORMAT!r})",
                            "delete it and rerun its training job")
    return lines[0], [r for r in lines if r.get("type") == "epoch"], lines[-1]
