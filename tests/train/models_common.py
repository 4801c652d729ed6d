"""What tests/train/test_models.py and its MPI job (models_job.py) agree on."""

import itertools

from supergcn.naming import STRATEGIES

HIDDEN, LAYERS, HEADS, EPOCHS, LR = 32, 3, 4, 5, 0.01
MODELS = ("gin", "gat")
#: (model, strategy, bits) of each run of the job: every strategy in FP32, and Int2 GAT under hybrid.
RUNS = (*((model, strategy, 32) for model, strategy in itertools.product(MODELS, STRATEGIES)), ("gat", "hybrid", 2))


def run_name(model: str, parts: int, strategy: str, bits: int) -> str:
    return f"{model}-{parts}-{strategy}-{bits}"
