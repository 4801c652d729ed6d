"""Bad inputs a user can give, driven through the real command line (and ``mpiexec`` for
training, and Snakemake for the config): each ends with exit status 2 and exactly one
line ``supergcn <step>: error: <what> — <fix>``, no traceback, nothing written where the
output would have gone, no temporary left, and every earlier good output untouched."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch
import yaml

from conftest import REPO, SHARED_DATASETS, mpiexec, run_cli, run_mpi, snakemake_each, snakemake_environment

BIN = Path(sys.executable).parent
ERROR_LINE = re.compile(r"^supergcn [a-z ]+: error: ")


@dataclass
class Workspace:
    """Good outputs of every step, made once; no case may change them."""

    root: Path

    def __getattr__(self, name: str) -> Path:
        return self.root / name


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Workspace:
    ws = Workspace(tmp_path_factory.mktemp("good"))
    steps = [
        ("prepare", "synthetic-tiny", "--out", ws.graph),
        ("prepare", "synthetic-tiny", "--seed", 1, "--out", ws.other_graph),
        ("partition", "--graph", ws.graph, "--parts", 2, "--out", ws.P2),
        ("partition", "--graph", ws.graph, "--parts", 2, "--seed", 5, "--out", ws.P2_other),
        ("plan", "--graph", ws.graph, "--partition", ws.P2, "--strategy", "hybrid", "--out", ws.plan),
        ("plan", "--graph", ws.graph, "--partition", ws.P2, "--strategy", "pre", "--out", ws.pre_plan),
    ]
    for step in steps:
        result = run_cli(*step)
        assert result.returncode == 0, result.stderr
    result = run_mpi(2, "train", *train_inputs(ws), "--out", ws.run / "metrics.jsonl", "--epochs", 2,
                     "--hidden", 8, "--save-model", ws.run / "model.pt")
    assert result.returncode == 0, result.stderr
    result = run_cli("tables", "--runs", ws.run / "metrics.jsonl", "--out-dir", ws.tables)
    assert result.returncode == 0, result.stderr
    return ws


def train_inputs(ws: Workspace, graph=None, partition=None, plan=None) -> list:
    return ["--graph", graph or ws.graph, "--partition", partition or ws.P2, "--plan", plan or ws.plan]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` (hidden ones included) with size and mtime."""
    return {str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def copy_of(source: Path, destination: Path) -> Path:
    shutil.copytree(source, destination)
    return destination


def users_folder(bad: Path) -> Path:
    """A folder of the user's own files, which an output must not replace."""
    (bad / "mine" / "sub").mkdir(parents=True)
    (bad / "mine" / "notes.txt").write_text("important\n")
    return bad / "mine"


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def fake_facebook(root: Path, damage) -> Path:
    """A three-node MUSAE-style raw folder with one file damaged by ``damage(raw)``."""
    raw = root / "facebook_page_page" / "raw"
    raw.mkdir(parents=True)
    (raw / "facebook_edges.csv").write_text("id_1,id_2\n0,1\n1,2\n")
    (raw / "facebook_target.csv").write_text("id,facebook_id,page_name,page_type\n0,10,a,tvshow\n1,11,b,company\n"
                                             "2,12,c,tvshow\n")
    (raw / "facebook.json").write_text(json.dumps({"0": [0, 2], "1": [1], "2": [2]}))
    damage(raw)
    return root


class Exploit:
    """Unpickling this runs a shell command: what a checkpoint must never do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def pjstat_failing(bad: Path) -> dict:
    fake = bad / "bin"
    fake.mkdir()
    (fake / "pjstat").write_text("#!/bin/sh\necho 'pjstat: PJM is not available on this host' >&2\nexit 3\n")
    (fake / "pjstat").chmod(0o755)
    return {"PATH": f"{fake}:{os.environ['PATH']}"}


def without_pjm() -> dict:
    """A PATH holding only the interpreter's and the system's basic folders (no pjstat)."""
    return {"PATH": f"{BIN}:/usr/bin:/bin"}


def config_overlay(bad: Path, **values) -> Path:
    path = bad / "overlay.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


# Each case: (id, how to run it, what the error line must say). ``args(ws, bad)`` makes
# any bad input under ``bad`` and returns the command; the runner is "cli", "mpi" (two
# ranks), "mpi3" (three) or "snakemake"; ``env(bad)`` adds environment variables.
CASES = [
    # prepare
    ("prepare: unknown dataset", "cli", lambda ws, bad: ["prepare", "ogbn-nope", "--out", bad / "g"],
     "unknown dataset 'ogbn-nope'"),
    ("prepare: R-MAT scale out of range", "cli", lambda ws, bad: ["prepare", "rmat-99", "--out", bad / "g"],
     "R-MAT scale 99 is out of range"),
    # A made-up MUSAE folder is no published file: read as a deliberate local variant, it
    # still meets the loader's own checks (tests/data/test_published.py refuses it as such).
    ("prepare: truncated raw JSON of a real dataset", "cli",
     lambda ws, bad: ["prepare", "facebook", "--accept-source-changes", "--raw-root", fake_facebook(
         bad / "raw", lambda raw: truncate(raw / "facebook.json")), "--out", ws.graph],
     "raw files of facebook"),
    ("prepare: raw files missing, the archive named", "cli",
     lambda ws, bad: ["prepare", "facebook", "--raw-root", bad / "raw", "--out", bad / "g"],
     "download https://snap.stanford.edu/data/facebook_large.zip"),
    ("prepare: raw files that disagree", "cli",
     lambda ws, bad: ["prepare", "facebook", "--accept-source-changes", "--raw-root", fake_facebook(
         bad / "raw", lambda raw: (raw / "facebook_edges.csv").write_text("id_1,id_2\n0,1\n1,7\n")),
                      "--out", bad / "g"],
     "refers to nodes outside"),
    ("prepare: a made-up file under a real dataset's name", "cli",
     lambda ws, bad: ["prepare", "facebook", "--raw-root", fake_facebook(bad / "raw", lambda raw: None),
                      "--out", bad / "g"],
     "is not the file MUSAE's facebook_large archive (Rozemberczki et al. 2019, on SNAP) published"),
    ("prepare: --out is an existing file", "cli",
     lambda ws, bad: ["prepare", "synthetic-tiny", "--out", ws.run / "metrics.jsonl"], "is an existing file"),
    ("prepare: --out under a regular file", "cli",
     lambda ws, bad: ["prepare", "synthetic-tiny", "--out", ws.run / "metrics.jsonl" / "g"],
     "is a file, not a directory"),
    # partition
    ("partition: no graph there", "cli",
     lambda ws, bad: ["partition", "--graph", bad / "nowhere", "--parts", 2, "--out", bad / "p"],
     "graph manifest"),
    ("partition: truncated indices.npy", "cli",
     lambda ws, bad: ["partition", "--graph", damaged_graph(ws, bad, "indices.npy"), "--parts", 2, "--out", ws.P2],
     "indices.npy is truncated"),
    ("partition: meta.json not JSON", "cli",
     lambda ws, bad: ["partition", "--graph", damaged_graph(ws, bad, "meta.json"), "--parts", 2, "--out", bad / "p"],
     "is not valid JSON"),
    ("partition: graph of another format", "cli",
     lambda ws, bad: ["partition", "--graph", foreign_graph(ws, bad), "--parts", 2, "--out", bad / "p"],
     "holds format 'supergcn-graph/0'"),
    ("partition: labels beyond the manifest's classes", "cli",
     lambda ws, bad: ["partition", "--graph", rewritten_graph(ws, bad, "labels", lambda labels: labels + 100),
                      "--parts", 2, "--out", bad / "p"],
     "labels in labels.npy are not below the manifest's"),
    ("partition: masks that overlap", "cli",
     lambda ws, bad: ["partition", "--graph", overlapping_masks(ws, bad), "--parts", 2, "--out", bad / "p"],
     "in more than one of the train, validation and test masks"),
    ("partition: labels shorter than the manifest says", "cli",
     lambda ws, bad: ["partition", "--graph", rewritten_graph(ws, bad, "labels", lambda labels: labels[:-1]),
                      "--parts", 2, "--out", bad / "p"],
     "labels.npy is int64["),
    ("partition: a neighbour id out of range", "cli",
     lambda ws, bad: ["partition", "--graph", rewritten_graph(ws, bad, "indices", lambda ids: ids * 0 + len(ids)),
                      "--parts", 2, "--out", bad / "p"],
     "lists neighbour ids outside"),
    ("partition: zero parts", "cli",
     lambda ws, bad: ["partition", "--graph", ws.graph, "--parts", 0, "--out", bad / "p"], "must be at least 1"),
    ("partition: more parts than nodes", "cli",
     lambda ws, bad: ["partition", "--graph", ws.graph, "--parts", 5000, "--out", bad / "p"], "cannot split"),
    # plan
    ("plan: partition of another graph", "cli",
     lambda ws, bad: ["plan", "--graph", ws.other_graph, "--partition", ws.P2, "--strategy", "pre", "--out", ws.plan],
     "built from a different graph"),
    ("plan: tampered parts.npy", "cli",
     lambda ws, bad: ["plan", "--graph", ws.graph, "--partition", tampered_parts(ws, bad), "--strategy", "pre",
                      "--out", bad / "plan"],
     "does not match its manifest"),
    ("plan: truncated parts.npy", "cli",
     lambda ws, bad: ["plan", "--graph", ws.graph, "--partition", truncated_parts(ws, bad), "--strategy", "pre",
                      "--out", bad / "plan"],
     "parts.npy is truncated"),
    ("plan: part ids beyond the parts, manifest rewritten to match", "cli",
     lambda ws, bad: ["plan", "--graph", ws.graph, "--partition", rewritten_partition(ws, bad, lambda parts: parts + 1),
                      "--strategy", "pre", "--out", bad / "plan"],
     "holds part ids from 1 to 2, outside 0..1"),
    ("plan: part ids for fewer nodes than the graph, manifest rewritten to match", "cli",
     lambda ws, bad: ["plan", "--graph", ws.graph, "--partition", rewritten_partition(ws, bad, lambda ids: ids[:-1]),
                      "--strategy", "pre", "--out", bad / "plan"],
     "part ids for a graph of"),
    ("plan: unknown strategy", "cli",
     lambda ws, bad: ["plan", "--graph", ws.graph, "--partition", ws.P2, "--strategy", "both", "--out", bad / "p"],
     "invalid choice: 'both'"),
    ("plan: a model's row costs for pre, which has no cover", "cli",
     lambda ws, bad: ["plan", "--graph", ws.graph, "--partition", ws.P2, "--strategy", "pre", "--model", "gat",
                      "--out", bad / "p"],
     "--model sets what the hybrid cover weighs, but the strategy is pre"),
    ("plan: GAT's cover for adaptive bits", "cli",
     lambda ws, bad: ["plan", "--graph", ws.graph, "--partition", ws.P2, "--strategy", "hybrid", "--model", "gat",
                      "--bits", "adaptive", "--out", bad / "p"],
     "no cover can be weighted by them"),
    ("train: GAT heads that do not divide the hidden width", "mpi",
     lambda ws, bad: train(ws, bad, "--model", "gat", "--heads", 3, hidden=16),
     "heads are concatenated into the hidden width 16, which they do not divide"),
    # volume
    ("volume: no plan there", "cli", lambda ws, bad: ["volume", bad / "nowhere"], "plan manifest"),
    ("volume: plan of an older format", "cli", lambda ws, bad: ["volume", old_plan(ws, bad)],
     "not a plan of this supergcn version"),
    # train
    ("train: dropout 1.5", "mpi", lambda ws, bad: train(ws, bad, "--dropout", 1.5), "must be in [0, 1), got 1.5"),
    ("train: zero epochs", "mpi", lambda ws, bad: train(ws, bad, "--epochs", 0), "must be at least 1"),
    ("train: 3-bit exchange", "mpi", lambda ws, bad: train(ws, bad, "--bits", 3), "invalid choice"),
    ("train: DistGNN schedule with Int2", "mpi", lambda ws, bad: train(ws, bad, "--schedule", "cd-5", "--bits", 2),
     "--schedule cd-5 (DistGNN) sends float32 rows, not 2-bit ones — use --bits 32 or --schedule sync"),
    ("train: --out an existing directory", "mpi", lambda ws, bad: train(ws, bad, out=ws.tables),
     "is an existing directory"),
    ("train: --out under a regular file", "mpi", lambda ws, bad: train(ws, bad, out=ws.run / "model.pt" / "m.jsonl"),
     "is a file, not a directory"),
    ("train: --checkpoint an existing directory", "mpi",
     lambda ws, bad: train(ws, bad, checkpoint=ws.tables), "is an existing directory"),
    ("train: initial weights not found", "mpi",
     lambda ws, bad: train(ws, bad, "--init-weights", bad / "none.pt"), "initial weights"),
    ("train: initial weights a text file", "mpi",
     lambda ws, bad: train(ws, bad, "--init-weights", text_file(bad)), "are not a torch state dict"),
    ("train: initial weights of another model", "mpi",
     lambda ws, bad: train(ws, bad, "--init-weights", ws.run / "model.pt", hidden=16), "do not fit this model"),
    ("train: resume from a damaged checkpoint", "mpi",
     lambda ws, bad: train(ws, bad, "--resume", checkpoint=damaged_checkpoint(ws, bad)),
     "damaged or not a supergcn checkpoint"),
    ("train: resume from a checkpoint that would run code", "mpi",
     lambda ws, bad: train(ws, bad, "--resume", checkpoint=exploit_checkpoint(bad)),
     "damaged or not a supergcn checkpoint"),
    ("train: truncated rank file of the plan", "mpi",
     lambda ws, bad: train(ws, bad, plan=damaged_plan(ws, bad, truncate_rank=1)), "does not match the hash"),
    ("train: rank file of another plan", "mpi",
     lambda ws, bad: train(ws, bad, plan=damaged_plan(ws, bad, swap_from=ws.pre_plan)), "does not match the hash"),
    ("train: plan of another partition", "mpi",
     lambda ws, bad: train(ws, bad, partition=ws.P2_other), "built from a different partition"),
    ("train: truncated rank-ordered features", "mpi",
     lambda ws, bad: train(ws, bad, partition=truncated_rows(ws, bad)), "rows_features.npy is truncated"),
    ("train: a rank file indexing past its matrix, hashes rewritten to match", "mpi",
     lambda ws, bad: train(ws, bad, plan=rewritten_plan(ws, bad, "remote_indices", lambda ids: ids + 10**6)),
     "contradicts itself: the remote CSR indexes columns outside"),
    ("train: a rank file with counts for another number of ranks, hashes rewritten to match", "mpi",
     lambda ws, bad: train(ws, bad, plan=rewritten_plan(ws, bad, "recv_counts", lambda counts: counts[:1])),
     "contradicts itself: recv_counts holds 1 values"),
    ("train: three ranks for a plan of two", "mpi3", lambda ws, bad: train(ws, bad),
     "is for 2 ranks but 3 were started — launch with `mpiexec -n 2`"),
    # tables and figures
    ("tables: truncated metrics file", "cli",
     lambda ws, bad: ["tables", "--runs", ws.run / "metrics.jsonl", truncated_metrics(ws, bad), "--out-dir",
                      ws.tables],
     "line 2 is not JSON"),
    ("tables: metrics file of a run that never finished", "cli",
     lambda ws, bad: ["tables", "--runs", bad / "nowhere.jsonl", "--out-dir", ws.tables], "not found"),
    ("tables: --plans without a dataset", "cli",
     lambda ws, bad: ["tables", "--runs", ws.run / "metrics.jsonl", "--plans", ws.plan, "--out-dir", ws.tables],
     "--plans takes DATASET=PLAN_DIR"),
    ("tables: a dataset's width that is no number", "cli",
     lambda ws, bad: ["tables", "--runs", ws.run / "metrics.jsonl", "--plans", f"tiny={ws.plan}",
                      "--hidden-by-dataset", "tiny=wide", "--out-dir", ws.tables],
     "--hidden-by-dataset gives tiny the width 'wide'"),
    ("tables: unknown speed-up baseline", "cli",
     lambda ws, bad: ["tables", "--runs", ws.run / "metrics.jsonl", "--baseline", "post-fp32-nolp", "--out-dir",
                      ws.tables],
     "speed-up baseline 'post-fp32-nolp'"),
    ("tables: an accuracy target over 100 %", "cli",
     lambda ws, bad: ["tables", "--runs", ws.run / "metrics.jsonl", "--absolute-targets", 150, "--out-dir",
                      ws.tables],
     "must be a percentage in (0, 100]"),
    ("figures: no tables", "cli",
     lambda ws, bad: figures(ws, bad, tables=bad / "nowhere"), "scaling.csv not found"),
    ("figures: a table left out", "cli",
     lambda ws, bad: figures(ws, bad, leave_out="breakdown"), "the breakdown table is not among the tables given"),
    ("figures: a metrics file the runs table names left out", "cli",
     lambda ws, bad: figures(ws, bad, runs=[shutil.copy(ws.run / "metrics.jsonl", bad / "other.jsonl")]),
     "the runs table names 1 metrics file(s) not given"),
    ("figures: a metrics file that is gone", "cli",
     lambda ws, bad: figures(ws, bad, runs=[ws.run / "metrics.jsonl", bad / "gone.jsonl"]),
     "gone.jsonl not found — run its training job first"),
    ("figures: an empty table", "cli",
     lambda ws, bad: figures(ws, bad, tables=empty_table(ws, bad)),
     "scaling.csv is damaged"),
    # pjm
    ("pjm submit: no site file", "cli",
     lambda ws, bad: ["pjm", "submit", "--site", bad / "site.yaml", "--nodes", 1, "--procs", 4, "--threads", 12,
                      "--elapse-minutes", 10, bad / "job.sh"],
     "site file"),
    ("pjm status: pjstat fails", "cli",
     lambda ws, bad: ["pjm", "status", "--state-dir", bad / "pjm", "4242"], "pjstat: PJM is not available"),
    ("pjm status: no pjstat on PATH", "cli",
     lambda ws, bad: ["pjm", "status", "--state-dir", bad / "pjm", "4242"], "pjstat not found"),
    # an output directory the step would wrongly replace (everything it holds would go)
    ("partition: --out the graph it reads", "cli",
     lambda ws, bad: ["partition", "--graph", copy_of(ws.graph, bad / "g"), "--parts", 2, "--out", bad / "g"],
     "holds files but no partition.json: it is not an earlier output of this step"),
    ("plan: --out a folder of the user's", "cli",
     lambda ws, bad: ["plan", "--graph", ws.graph, "--partition", ws.P2, "--strategy", "pre", "--out",
                      users_folder(bad)], "holds files but no plan.json: it is not an earlier output of this step"),
    ("prepare: --out a partition", "cli",
     lambda ws, bad: ["prepare", "synthetic-tiny", "--out", copy_of(ws.P2, bad / "p")], "holds files but no meta.json"),
    # the Snakemake config
    ("config: negative learning rate", "snakemake",
     lambda ws, bad: config_overlay(bad, training={"lr": -1}), "training.lr: -1 is less than"),
    ("config: unknown key", "snakemake",
     lambda ws, bad: config_overlay(bad, learning_rate=0.1), "learning_rate: unknown key"),
    ("config: 3-bit variant", "snakemake",
     lambda ws, bad: config_overlay(bad, variants=[{"strategy": "hybrid", "bits": 3, "label_propagation": False}]),
     "variants.0.bits: 3 is not one of"),
    ("config: a variant that cannot run", "snakemake",
     lambda ws, bad: config_overlay(bad, variants=[{"strategy": "pre", "bits": 2, "label_propagation": False,
                                                    "schedule": "cd-5"}]),
     "variant pre-int2-nolp-cd-5: --schedule cd-5 (DistGNN) sends float32 rows"),
    ("config: a dataset's width GAT's heads do not divide", "snakemake",
     lambda ws, bad: config_overlay(bad, datasets=["synthetic-tiny"], training_by_dataset={"synthetic-tiny": {
         "hidden": 250}}, variants=[{"strategy": "hybrid", "bits": 32, "label_propagation": False, "model": "gat"}]),
     "do not divide — choose --hidden a multiple of --heads (training_by_dataset.synthetic-tiny)"),
    ("config: KaMinPar asked to keep constraints separate", "snakemake",
     lambda ws, bad: config_overlay(bad, partition={"constraints": ["nodes", "train"], "seed": 0, "engine": "kaminpar",
                                                    "separate_constraints": True}),
     "partition.separate_constraints: KaMinPar balances one combined weight; set it to false or null"),
    ("config: KaMinPar given part of the edges", "snakemake",
     lambda ws, bad: config_overlay(bad, partition={"constraints": ["nodes"], "seed": 0, "engine": "kaminpar",
                                                    "edge_fraction": 0.5}),
     "partition.edge_fraction: KaMinPar partitions the whole graph; set it to 1"),
    ("config: renamed key", "snakemake",
     lambda ws, bad: config_overlay(bad, model={}), "config key `model:` is now `perf:`"),
]
ENVIRONMENTS = {"pjm status: pjstat fails": pjstat_failing, "pjm status: no pjstat on PATH": lambda bad: without_pjm()}


def train(ws, bad, *extra, graph=None, partition=None, plan=None, out=None, checkpoint=None, hidden=8) -> list:
    """A training command whose every output would go to ``bad`` (unless a case names one)."""
    return ["train", *train_inputs(ws, graph, partition, plan), "--out", out or bad / "metrics.jsonl",
            "--epochs", 2, "--hidden", hidden, "--checkpoint", checkpoint or bad / "checkpoint.pt",
            "--checkpoint-every", 1, "--save-model", bad / "model.pt", "--save-logits", bad / "logits.npy", *extra]


def damaged_graph(ws, bad, name) -> Path:
    graph = copy_of(ws.graph, bad / "graph")
    truncate(graph / name)
    return graph


def with_format(manifest: Path, format_name: str) -> None:
    """Rewrite a JSON manifest's ``format``, as a file of another version would have it."""
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format": format_name}))


def rewritten_graph(ws, bad, name, change) -> Path:
    """A copy of the graph whose ``name``.npy is replaced by ``change(array)``: it parses,
    but disagrees with the manifest or the other arrays."""
    graph = copy_of(ws.graph, bad / "graph")
    np.save(graph / f"{name}.npy", change(np.load(graph / f"{name}.npy")))
    return graph


def overlapping_masks(ws, bad) -> Path:
    graph = copy_of(ws.graph, bad / "graph")
    train, test = np.load(graph / "train_mask.npy"), np.load(graph / "test_mask.npy")
    train[np.flatnonzero(test)[0]] = True
    train[np.flatnonzero(train)[0]] = False  # the same count, so only the overlap is wrong
    np.save(graph / "train_mask.npy", train)
    return graph


def foreign_graph(ws, bad) -> Path:
    graph = copy_of(ws.graph, bad / "graph")
    with_format(graph / "meta.json", "supergcn-graph/0")
    return graph


def tampered_parts(ws, bad) -> Path:
    partition = copy_of(ws.P2, bad / "P2")
    parts = np.load(partition / "parts.npy")
    np.save(partition / "parts.npy", 1 - parts)
    return partition


def truncated_parts(ws, bad) -> Path:
    partition = copy_of(ws.P2, bad / "P2")
    truncate(partition / "parts.npy")
    return partition


def truncated_rows(ws, bad) -> Path:
    partition = copy_of(ws.P2, bad / "P2")
    truncate(partition / "rows_features.npy")
    return partition


def rewritten_partition(ws, bad, change) -> Path:
    """A copy of the partition with ``parts.npy`` changed and its manifest's hash updated
    to match: arrays that parse and pass the hash, but contradict the graph."""
    from supergcn.partition.partition import Partition

    partition = copy_of(ws.P2, bad / "P2")
    parts = change(np.load(partition / "parts.npy"))
    np.save(partition / "parts.npy", parts)
    manifest = json.loads((partition / "partition.json").read_text())
    manifest["partition_hash"] = Partition(parts, manifest["num_parts"]).content_hash()
    (partition / "partition.json").write_text(json.dumps(manifest))
    return partition


def rewritten_plan(ws, bad, name, change) -> Path:
    """A copy of the plan with array ``name`` of rank 1's file changed and every hash
    above it (``rank_hashes.npy``, ``plan.json``) updated to match."""
    from supergcn.data.digests import bytes_digest, file_digest
    from supergcn.plan.store import _HASH_BYTES, RANK_HASHES_FILE

    plan = copy_of(ws.plan, bad / "plan")
    rank_file = plan / "rank_00001.npz"
    with np.load(rank_file) as arrays:
        values = {key: arrays[key] for key in arrays.files}
    values[name] = change(values[name])
    np.savez(rank_file, **values)
    hashes = np.load(plan / RANK_HASHES_FILE)
    hashes[1] = bytes_digest(rank_file.read_bytes(), _HASH_BYTES)
    np.save(plan / RANK_HASHES_FILE, hashes)
    manifest = json.loads((plan / "plan.json").read_text())
    manifest["file_hashes"][RANK_HASHES_FILE] = file_digest(plan / RANK_HASHES_FILE, _HASH_BYTES)
    (plan / "plan.json").write_text(json.dumps(manifest))
    return plan


def old_plan(ws, bad) -> Path:
    plan = copy_of(ws.plan, bad / "plan")
    with_format(plan / "plan.json", "supergcn-plan/1")
    return plan


def damaged_plan(ws, bad, truncate_rank=None, swap_from=None) -> Path:
    plan = copy_of(ws.plan, bad / "plan")
    if truncate_rank is not None:
        truncate(plan / f"rank_{truncate_rank:05d}.npz", keep=0.9)
    if swap_from is not None:
        shutil.copy(swap_from / "rank_00000.npz", plan / "rank_00000.npz")
    return plan


def text_file(bad) -> Path:
    path = bad / "weights.pt"
    path.write_text("these are not weights\n")
    return path


def damaged_checkpoint(ws, bad) -> Path:
    path = bad / "old-checkpoint.pt"
    shutil.copy(ws.run / "model.pt", path)
    truncate(path)
    return path


def exploit_checkpoint(bad) -> Path:
    path = bad / "old-checkpoint.pt"
    with open(path, "wb") as handle:
        pickle.dump({"epoch": 1, "model": Exploit(bad / "exploited")}, handle)
    return path


def truncated_metrics(ws, bad) -> Path:
    path = bad / "killed.jsonl"
    text = (ws.run / "metrics.jsonl").read_text()
    first_two = text.splitlines(keepends=True)[:2]
    path.write_text(first_two[0] + first_two[1][:len(first_two[1]) // 2])
    return path


def figures(ws, bad, tables=None, leave_out=None, runs=None) -> list:
    """``supergcn figures`` on the good tables (those in ``tables``, but ``leave_out``; the good
    study has no volume table) and the good run (or ``runs``), into ``bad/figures``."""
    from supergcn.naming import FIGURES, OPTIONAL_TABLES

    names = [name for name in dict.fromkeys(figure.table for figure in FIGURES.values())
             if name != leave_out and name not in OPTIONAL_TABLES]
    metrics = [ws.run / "metrics.jsonl"] if runs is None else runs
    return ["figures", "--tables", *((tables or ws.tables) / f"{name}.csv" for name in names),
            "--runs", *metrics, "--out-dir", bad / "figures"]


def empty_table(ws, bad) -> Path:
    tables = copy_of(ws.tables, bad / "tables")
    (tables / "scaling.csv").write_text("")
    return tables


def run_case(runner: str, command, env: dict) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    launcher = {"cli": [], "mpi": [mpiexec(), "-n", "2"], "mpi3": [mpiexec(), "-n", "3"]}[runner]
    return subprocess.run([*launcher, sys.executable, "-m", "supergcn.cli", *map(str, command)], capture_output=True,
                          text=True, env=full_env, timeout=300)


class Refusal(NamedTuple):
    """A case's run: its folder of bad inputs, the snapshots of the good outputs and of that
    folder before it ran, and what it printed."""

    bad: Path
    good_before: dict
    bad_before: dict
    result: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def config_refusals(good, tmp_path_factory) -> dict[str, Refusal]:
    """The dry runs of the config cases (``snakemake -n`` with their overlay, in the
    repository), forked from one started Snakemake (:func:`conftest.snakemake_each`): a
    dry run is mostly Snakemake's start-up."""
    root = tmp_path_factory.mktemp("config")
    refusals, commands = {}, []
    for name, runner, make, _ in CASES:
        if runner == "snakemake":
            bad = root / f"case{len(commands)}"
            bad.mkdir()
            overlay = make(good, bad)
            refusals[name] = (bad, snapshot(bad))
            env = snakemake_environment(ENVIRONMENTS.get(name, lambda bad: {})(bad))
            commands.append((["-n", "--configfiles", "config/config.yaml", overlay], env, REPO))
    good_before = snapshot(good.root)
    results = snakemake_each(commands, root / "output")
    return {name: Refusal(bad, good_before, bad_before, result)
            for (name, (bad, bad_before)), result in zip(refusals.items(), results)}


@pytest.mark.parametrize("name, runner, make, message", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_one_clear_line_and_leaves_nothing(good, request, tmp_path, name, runner, make, message):
    if runner == "snakemake":
        bad, good_before, bad_before, result = request.getfixturevalue("config_refusals")[name]
    else:
        bad = tmp_path / "bad"
        bad.mkdir()
        env = ENVIRONMENTS.get(name, lambda bad: {})(bad)
        command = make(good, bad)
        good_before, bad_before = snapshot(good.root), snapshot(bad)
        result = run_case(runner, command, env)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if "error:" in line]
    assert len(errors) == 1, output
    line = errors[0]
    if runner != "snakemake":
        assert result.returncode == 2, output
        assert ERROR_LINE.match(line), line
    else:  # refused before any job is planned
        assert line.startswith("supergcn config: error: ") and "Job stats" not in result.stdout, output
    assert message in line, line
    assert " — " in line, f"no fix given: {line}"
    assert snapshot(good.root) == good_before, "an earlier good output was touched"
    assert snapshot(bad) == bad_before, "the failed step left output or a temporary behind"
    assert not (bad / "exploited").exists()


def test_enough_distinct_bad_inputs_are_covered():
    steps = {name.split(":")[0].split()[0] for name, *_ in CASES}
    assert len(CASES) >= 30 and len({name for name, *_ in CASES}) == len(CASES)
    assert steps == {"prepare", "partition", "plan", "volume", "train", "tables", "figures", "pjm", "config"}


def test_a_truncated_raw_planetoid_file_is_named(tmp_path):
    """The real Cora files with one truncated: refused by its digest before PyG unpickles it,
    and, where a changed source is accepted, by PyG's reading of it."""
    cora = SHARED_DATASETS / "planetoid" / "Cora" / "raw"
    if not cora.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATASETS}")
    raw = tmp_path / "planetoid" / "Cora" / "raw"
    shutil.copytree(cora, raw)
    truncate(raw / "ind.cora.x")
    result = run_cli("prepare", "cora", "--raw-root", tmp_path, "--out", tmp_path / "g")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("error:") == 1 and f"{raw / 'ind.cora.x'} is not the file" in result.stderr
    assert not (tmp_path / "g").exists()
    accepted = run_cli("prepare", "cora", "--raw-root", tmp_path, "--out", tmp_path / "g", "--accept-source-changes")
    assert accepted.returncode == 2 and "Traceback" not in accepted.stderr, accepted.stderr
    assert accepted.stderr.count("error:") == 1 and "the raw files of Planetoid under" in accepted.stderr
    assert not (tmp_path / "g").exists()


def test_debug_shows_the_traceback_behind_a_user_error(tmp_path):
    quiet = run_cli("partition", "--graph", tmp_path / "nowhere", "--parts", 2, "--out", tmp_path / "p")
    loud = run_cli("partition", "--graph", tmp_path / "nowhere", "--parts", 2, "--out", tmp_path / "p", "--debug")
    assert quiet.returncode == loud.returncode == 2
    assert "Traceback" not in quiet.stderr and "Traceback" in loud.stderr
    assert quiet.stderr.strip().splitlines()[-1] == loud.stderr.strip().splitlines()[-1]


def test_a_checkpoint_that_would_run_code_is_never_unpickled(good, tmp_path):
    """The exploit really runs under a plain unpickler (so the test above can fail)."""
    marker = tmp_path / "exploited"
    path = tmp_path / "c.pt"
    torch.save({"model": Exploit(marker)}, path)
    torch.load(path, weights_only=False)
    assert marker.exists()


@pytest.fixture
def small_disk(tmp_path):
    """A file system of one 4 KiB page, mounted for the test: the kernel's own ENOSPC,
    part-way through a write (needs root, as CI has; skipped elsewhere)."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(mount)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small file system here ({mounted.stderr.strip()}): the test needs root")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


# Each case: (id, runner, command writing one output to ``small`` and any other to ``room``).
FULL_DISK_CASES = [
    ("prepare", "cli", lambda ws, room, small: ["prepare", "synthetic-tiny", "--out", small / "graph"]),
    ("partition", "cli", lambda ws, room, small: ["partition", "--graph", ws.graph, "--parts", 2,
                                                  "--out", small / "P2"]),
    ("plan", "cli", lambda ws, room, small: ["plan", "--graph", ws.graph, "--partition", ws.P2, "--strategy",
                                             "hybrid", "--out", small / "plan"]),
    ("train: metrics", "mpi", lambda ws, room, small: short_run(ws, small / "metrics.jsonl")),
    ("train: checkpoint", "mpi", lambda ws, room, small: short_run(ws, room / "metrics.jsonl", "--checkpoint",
                                                                   small / "checkpoint.pt", "--checkpoint-every", 1)),
    ("train: model", "mpi", lambda ws, room, small: short_run(ws, room / "metrics.jsonl", "--save-logits",
                                                              room / "logits.npy", "--save-model",
                                                              small / "model.pt")),
    ("train: logits", "mpi", lambda ws, room, small: short_run(ws, room / "metrics.jsonl", "--save-logits",
                                                               small / "logits.npy")),
    ("tables", "cli", lambda ws, room, small: ["tables", "--runs", ws.run / "metrics.jsonl", "--out-dir",
                                               small / "tables"]),
    ("figures", "cli", lambda ws, room, small: figures(ws, small)),
]


def short_run(ws, out, *extra) -> list:
    return ["train", *train_inputs(ws), "--out", out, "--epochs", 2, "--hidden", 8, *extra]


@pytest.mark.parametrize("name, runner, make", FULL_DISK_CASES, ids=[case[0] for case in FULL_DISK_CASES])
def test_a_full_disk_is_one_clear_line_and_leaves_nothing(good, tmp_path, small_disk, name, runner, make):
    """Every step that writes, with its output on a file system too small for it: one
    line naming the output and the space, exit status 2, nothing left on either disk
    (training: every rank ends with that line, none is aborted)."""
    room = tmp_path / "room"
    room.mkdir()
    result = run_case(runner, make(good, room, small_disk), {})
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output and "MPI_Abort" not in output, output
    errors = [line for line in output.splitlines() if "error:" in line]
    assert len(errors) == 1, output
    assert ERROR_LINE.match(errors[0]) and f"no space left for {small_disk}/" in errors[0], errors[0]
    assert "free there now" in errors[0] and " — " in errors[0], errors[0]
    assert list(small_disk.iterdir()) == [] and list(room.iterdir()) == [], output
