"""Collect the per-dataset volume tables into one Markdown table."""

import sys
from pathlib import Path

import pandas as pd

from supergcn.storage import write_text

with open(snakemake.log[0], "w") as log:
    sys.stderr = log
    frames = []
    for path in snakemake.input:
        frame = pd.read_csv(path)
        frame.insert(0, "dataset", Path(path).stem)
        frames.append(frame.drop(columns=["plan"]))
    table = pd.concat(frames, ignore_index=True)
    write_text(snakemake.output[0], table.to_markdown(index=False, floatfmt=".3f") + "\n")
