"""A finished run's metrics kept beside its checkpoint (supergcn.train.finished): what
stands for a run, and what does not."""

import hashlib
import json

from supergcn.train.config import TrainConfig
from supergcn.train.finished import finished_metrics, finished_paths, keep_finished, restore_finished, run_identity

METRICS = '{"type": "header"}\n{"type": "epoch", "epoch": 1}\n{"type": "summary"}\n'


def config(**values):
    return TrainConfig(graph="g", partition="p", plan="q", out="m.jsonl", **values)


def test_the_kept_file_comes_back_byte_for_byte(tmp_path):
    checkpoint, out = tmp_path / "seed0.pt", tmp_path / "m.jsonl"
    keep_finished(checkpoint, METRICS, "id", 2)
    copy, manifest = finished_paths(checkpoint)
    assert json.loads(manifest.read_text())["sha256"] == hashlib.sha256(copy.read_bytes()).hexdigest()
    line = restore_finished(checkpoint, out, "id", 2)
    assert out.read_text() == METRICS and "restored with the metrics the run wrote" in line
    assert "holds the metrics" in restore_finished(checkpoint, out, "id", 2), "an --out already right stays"


def test_only_this_very_run_and_a_whole_copy_stand_for_it(tmp_path):
    checkpoint, out = tmp_path / "seed0.pt", tmp_path / "m.jsonl"
    assert finished_metrics(checkpoint, "id", 2) == (None, "no finished run kept")
    keep_finished(checkpoint, METRICS, "id", 2)
    assert finished_metrics(checkpoint, "other", 2)[1] == "the kept run is of another configuration or process count"
    assert finished_metrics(checkpoint, "id", 4)[0] is None
    copy, _ = finished_paths(checkpoint)
    copy.write_text(METRICS[:-10])  # cut short after the manifest was written
    assert "is not the file that finished" in finished_metrics(checkpoint, "id", 2)[1]
    assert restore_finished(checkpoint, out, "id", 2) is None and not out.exists()


def test_a_run_is_identified_by_every_option_but_resume():
    fingerprint = "f" * 24
    same = run_identity(config(epochs=40), fingerprint)
    assert run_identity(config(epochs=40, resume=True), fingerprint) == same
    # epochs is not in the trajectory fingerprint (a checkpoint at 10 may train on to 40),
    # but a run of 40 epochs does not stand for one of 60.
    assert run_identity(config(epochs=60), fingerprint) != same
    assert run_identity(config(epochs=40), "0" * 24) != same
