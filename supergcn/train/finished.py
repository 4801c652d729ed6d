"""A finished run's metrics, kept beside its checkpoint so that it is never trained again.

A scheduler's time limit or a Ctrl-C can reach Snakemake while a run is finishing: the
metrics file is written, but the job is not yet recorded as done. Snakemake then counts
the file as incomplete, and its rerun (the profiles' ``rerun-incomplete``) deletes it and
trains the run again from scratch, hours of allocation for a result that was already
there. So a run that finishes with a checkpoint path writes its metrics *first* beside the
checkpoint, as ``<checkpoint>.finished.jsonl`` with a manifest ``<checkpoint>.finished.json``
(the run's identity: :func:`run_identity`; its rank count and the file's SHA-256), and
only then to ``--out``; the model's checkpoint itself goes. ``--resume`` with a copy whose
manifest matches the run (every option but ``--resume`` itself, the very graph, partition
and plan, the same P; the workflow's checkpoint path also names the training code's hash)
and whose bytes are whole restores the very file to ``--out`` without training: the same
hash.

A copy stays until a run of another configuration replaces it, or its checkpoint root is
deleted, which is how a study trains finished runs again (to time them anew).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from supergcn.data.storage import write_text

#: The manifest's format.
FINISHED_FORMAT = 1


def run_identity(config, fingerprint: str) -> str:
    """What a kept run must match to stand for ``config``'s: its trajectory fingerprint
    (the options that shape the weights, the inputs' hashes) and every other option as
    well (the epoch count, which a checkpoint may extend, and what only the metrics
    record), but ``resume``, which says how the run was started, not what it is.

    Args:
        config: the run's :class:`~supergcn.train.config.TrainConfig`.
        fingerprint: its :meth:`~supergcn.train.config.TrainConfig.trajectory_fingerprint`.

    Returns:
        24 hexadecimal digits.
    """
    options = {key: value for key, value in config.as_json().items() if key != "resume"}
    payload = json.dumps({"fingerprint": fingerprint, "options": options}, sort_keys=True, default=str)
    return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()


def keeps_finished(config) -> bool:
    """Whether a run keeps its finished metrics (and a rerun may restore them): it has a
    checkpoint path, and writes nothing but its metrics (a restored run could not give back
    a model or logits it did not keep)."""
    return config.checkpoint is not None and config.save_model is None and config.save_logits is None


def finished_paths(checkpoint: Path) -> tuple[Path, Path]:
    """(the metrics copy, its manifest) of the run whose checkpoint is ``checkpoint``."""
    return (checkpoint.with_name(f"{checkpoint.name}.finished.jsonl"),
            checkpoint.with_name(f"{checkpoint.name}.finished.json"))


def keep_finished(checkpoint: Path, metrics: str, identity: str, num_ranks: int) -> None:
    """Write ``metrics`` (the whole metrics file) beside ``checkpoint``, then its manifest:
    a manifest names only a copy written whole.

    Raises:
        SuperGCNError: the copy cannot be written (a full disk).
    """
    copy, manifest = finished_paths(checkpoint)
    manifest.unlink(missing_ok=True)  # no manifest names a copy while it is replaced
    write_text(copy, metrics)
    write_text(manifest, json.dumps({"format": FINISHED_FORMAT, "identity": identity, "num_ranks": num_ranks,
                                     "sha256": hashlib.sha256(metrics.encode()).hexdigest()}, indent=1) + "\n")


def finished_metrics(checkpoint: Path, identity: str, num_ranks: int) -> tuple[str | None, str]:
    """The kept metrics of this very run, or None with the reason they cannot stand for it.

    Args:
        checkpoint: the run's checkpoint path.
        identity: the run's :func:`run_identity`.
        num_ranks: its rank count.

    Returns:
        ``(text, "")`` where a whole copy of this run's metrics is kept; ``(None, why)`` otherwise.
    """
    copy, manifest = finished_paths(checkpoint)
    if not manifest.is_file():
        return None, "no finished run kept"
    try:
        kept = json.loads(manifest.read_text())
        text = copy.read_text()
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return None, f"its kept metrics cannot be read ({exc.__class__.__name__})"
    if not isinstance(kept, dict) or kept.get("format") != FINISHED_FORMAT:
        return None, f"{manifest} is not a finished run's manifest of this version"
    if kept.get("identity") != identity or kept.get("num_ranks") != num_ranks:
        return None, "the kept run is of another configuration or process count"
    if hashlib.sha256(text.encode()).hexdigest() != kept.get("sha256"):
        return None, f"{copy} is not the file that finished (its SHA-256 differs)"
    return text, ""


def restore_finished(checkpoint: Path, out: Path, identity: str, num_ranks: int) -> str | None:
    """Put the kept metrics of this very run at ``out`` (:func:`finished_metrics`), unless
    ``out`` holds them already.

    Returns:
        The line saying so, or None where nothing is kept for this run (it is to be trained).

    Raises:
        SuperGCNError: ``out`` cannot be written.
    """
    text, why = finished_metrics(checkpoint, identity, num_ranks)
    if text is None:
        return None
    try:
        same = out.is_file() and out.read_text() == text
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        write_text(out, text)
    return (f"already finished: {out} {'holds' if same else 'restored with'} the metrics the run wrote "
            f"(kept at {finished_paths(checkpoint)[0]}), not trained again; delete that file to train it again")
