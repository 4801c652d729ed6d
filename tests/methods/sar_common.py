"""What tests/methods/test_sar.py and its MPI job (sar_job.py) agree on: the runs, by name,
and the options every run shares."""

HIDDEN, EPOCHS, LR = 32, 5, 0.01
#: P of the runs (SAR's exactness is asked at 3, 5 and 7).
PARTS = (3, 5, 7)
#: The models SAR runs: a layer's aggregation is a sum of rows.
MODELS = ("sage", "gcn", "gin")
STRATEGIES = ("post", "hybrid")
MODES = ("off", "sa", "sar")


def runs() -> dict[str, dict]:
    """name -> the options of its ``TrainConfig`` beyond the shared ones: each model on each
    plan, by the one-shot exchange (``off``) and by SAR's two modes."""
    return {f"{model}-{strategy}-{mode}": {"model": model, "strategy": strategy, "sar": mode}
            for model in MODELS for strategy in STRATEGIES for mode in MODES}
