"""What tests/methods/test_sar.py and its MPI job (sar_job.py) agree on: the runs, by name,
and the options every run shares."""

HIDDEN, EPOCHS, LR = 32, 5, 0.01
#: P of the runs (SAR's exactness is asked at 3, 5 and 7).
PARTS = (3, 5, 7)
#: The models SAR runs: a sum of rows (any plan) and attention (the post plan).
MODELS = ("sage", "gcn", "gin", "gat")
STRATEGIES = ("post", "hybrid")
MODES = ("off", "sa", "sar")


def plans(model: str) -> tuple[str, ...]:
    """The plans SAR runs ``model`` on (its card's rule, held here by hand: the test checks the card)."""
    return ("post",) if model == "gat" else STRATEGIES


def cases() -> list[tuple[str, str]]:
    """(model, strategy) of every run pair."""
    return [(model, strategy) for model in MODELS for strategy in plans(model)]


def runs() -> dict[str, dict]:
    """name -> the options of its ``TrainConfig`` beyond the shared ones: each model on each
    plan it takes, by the one-shot exchange (``off``) and by SAR's two modes."""
    return {f"{model}-{strategy}-{mode}": {"model": model, "strategy": strategy, "sar": mode}
            for model, strategy in cases() for mode in MODES}
