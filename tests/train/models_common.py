"""What tests/train/test_models.py and its MPI job (models_job.py) agree on."""

import itertools

from supergcn.naming import STRATEGIES

HIDDEN, LAYERS, HEADS, EPOCHS, LR = 32, 3, 4, 5, 0.01
MODELS = ("gin", "gat")
#: (model, strategy, bits, kernel) of each run of the job: every strategy in FP32, Int2 GAT
#: under hybrid, and GAT on torch's operations (the reference path, and attention dropout's).
RUNS = (*((model, strategy, 32, "numba") for model, strategy in itertools.product(MODELS, STRATEGIES)),
        ("gat", "hybrid", 2, "numba"), ("gat", "hybrid", 32, "torch"))


def run_name(model: str, parts: int, strategy: str, bits: int, kernel: str = "numba") -> str:
    return f"{model}-{parts}-{strategy}-{bits}-{kernel}"
