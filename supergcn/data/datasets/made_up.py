"""Features and labels for graphs that ship without them (UK-2007-05, Proteins), made up
deterministically from a seed as the paper does, and recorded in the graph manifest."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from supergcn.data.written_once import array_written_once

#: Rows generated per block of features.
BLOCK_ROWS = 1 << 18


def made_up_features(path: Path, num_nodes: int, num_features: int, seed: int) -> np.ndarray:
    """Standard normal float32 features, row block b drawn from ``(seed, b)``, written once
    to ``path`` a block at a time and memory-mapped from there (reused when its shape
    matches): never whole in memory."""
    def draw(start, rows):
        np.random.default_rng([seed, start // BLOCK_ROWS]).standard_normal(rows.shape, dtype=np.float32, out=rows)
    return array_written_once(path, (num_nodes, num_features), np.float32, draw, BLOCK_ROWS,
                              what=f"prepare: drawing the features of {path.name}")


def made_up_labels(num_nodes: int, num_classes: int, seed: int) -> np.ndarray:
    """Uniform labels in 0..num_classes-1, drawn from ``(seed, num_nodes)``."""
    return np.random.default_rng([seed, num_nodes]).integers(0, num_classes, num_nodes)
