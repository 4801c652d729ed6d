"""Everything one training run is asked to do, with the defaults of the paper's Table 2.

Standard library only: the command line builds its options and their defaults from
:class:`TrainConfig`, so a default is written once, here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from supergcn.naming import (
    ADAPTIVE,
    ADAPTIVE_GROUP_SIZE,
    ADAPTIVE_PERIOD,
    ADAPTIVE_WEIGHT,
    DEFAULT_PARAMETER_DTYPE,
    SYNCHRONOUS,
    schedule_delay,
)

#: The share of training labels fed as inputs in the paper's label-propagation runs.
UPSTREAM_LABEL_RATE = 0.62


@dataclass
class TrainConfig:
    """One training run. ``graph``, ``partition`` and ``plan`` are step output
    directories, ``out`` the metrics file (JSON lines) to write."""

    graph: Path
    partition: Path
    plan: Path
    out: Path
    model: str = "sage"
    num_layers: int = 3
    hidden: int = 256
    dropout: float = 0.5
    layer_norm: bool = True
    lr: float = 0.01
    weight_decay: float = 0.0
    epochs: int = 200
    seed: int = 0
    threads: int = 1
    kernel: str = "numba"
    bits: int | str = 32
    rounding: str = "nearest"
    overlap: bool = True
    schedule: str = SYNCHRONOUS
    adaptive_weight: float = ADAPTIVE_WEIGHT
    adaptive_group_size: int = ADAPTIVE_GROUP_SIZE
    adaptive_period: int = ADAPTIVE_PERIOD
    parameter_dtype: str = DEFAULT_PARAMETER_DTYPE
    label_rate: float = 0.0
    label_draw: str = "exact"
    input_norm: bool = False
    dense_dtype: str = "float32"
    aggregate_first: bool = False
    checkpoint: Path | None = None
    checkpoint_every: int = 0
    resume: bool = False
    init_weights: Path | None = None
    save_model: Path | None = None
    save_logits: Path | None = None
    fail_at_epoch: int | None = None
    fail_rank: int = 0

    def trajectory_fingerprint(self, hashes: dict) -> str:
        """What a checkpoint must agree on to be resumed (not epochs, outputs or threads)."""
        keys = ["model", "num_layers", "hidden", "dropout", "layer_norm", "lr", "weight_decay", "seed", "bits",
                "rounding", "parameter_dtype", "label_rate", "label_draw", "input_norm", "dense_dtype",
                "aggregate_first", "schedule"]
        if self.bits == ADAPTIVE:  # the other variants do not read them
            keys += adaptive_fields()
        payload = json.dumps({**{k: getattr(self, k) for k in keys}, **hashes}, sort_keys=True)
        return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()

    def conflicts(self) -> list[str]:
        """One message (with its fix) per combination of options that cannot run together."""
        problems = []
        if not 0 <= self.adaptive_weight <= 1:
            problems.append(f"--adaptive-weight is lambda of AdaQP's Problem 12 and must lie in [0, 1], "
                            f"got {self.adaptive_weight} — pass a value in [0, 1]")
        if schedule_delay(self.schedule) != 0:
            if self.model != "sage":
                problems.append(f"schedule {self.schedule} (DistGNN) is defined for the mean aggregation only — "
                                "use --model sage or --schedule sync")
            if self.bits != 32:
                problems.append(f"schedule {self.schedule} (DistGNN) sends float32 partial aggregates — "
                                "use --bits 32 or --schedule sync")
        return problems

    def check_outputs(self) -> None:
        """Refuse, before any work, the files this run writes that could not be written at
        the end (the command line checks them as it parses; this is for callers of the API)."""
        from supergcn.data.storage import check_output_path

        for path in (self.out, self.checkpoint, self.save_model, self.save_logits):
            if path is not None:
                check_output_path(path, directory=False)

    def as_json(self) -> dict:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(self).items()}


def adaptive_fields() -> list[str]:
    """The options of adaptive bit widths (``adaptive_*``), which only ``bits=adaptive`` reads."""
    return [name for name in TrainConfig.__dataclass_fields__ if name.startswith("adaptive_")]


def default(name: str):
    """The default of one :class:`TrainConfig` field."""
    return TrainConfig.__dataclass_fields__[name].default
