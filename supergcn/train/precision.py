"""What a run computes in (``--precision``): float32, or bfloat16 where the CPU has it.

Under ``bf16`` every GEMM runs in bfloat16 from the float32 master weights (the optimizer
and its state stay float32), the features and every hidden layer's activations are stored
in bfloat16 (half their bytes), and the aggregations read bfloat16 rows and sum them in
float32 in the fixed order of the float32 kernels (:mod:`supergcn.kernels.gather`: a
bfloat16 value widens to float32 exactly, so the sum has the same bits on every CPU
target); their output, LayerNorm's statistics, the loss and the attention kernels stay
float32, and so do the gradients the aggregations send back, rounded to bfloat16 once,
after the mean's scale, before the transposed gathers read them.

``auto`` picks bf16 where both hold, fp32 otherwise, and says why:

* the CPU has the bfloat16 instructions bf16 training was measured faster with
  (:data:`BFLOAT16_FASTER`: AMX-BF16), on every rank of the job. A CPU with bfloat16
  arithmetic but not those (:func:`bfloat16_instructions`: AVX512_BF16 alone, as AMD Zen 4
  or a Xeon whose hypervisor hides AMX; Arm BF16 or SVE BF16, not measured) runs fp32, and
  so does one with none (Fugaku's A64FX);
* the model's card allows it (:attr:`~supergcn.models.card.ModelCard.bfloat16_auto`):
  its test accuracy in bf16 stayed within :data:`ACCURACY_HELD` points of float32's on
  every graph measured (docs/results.md);
* the run's compared method computes in bf16 (its card's ``precisions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from supergcn.models import card

#: The most test accuracy (points) bf16 may lose against float32 for ``auto`` to pick it.
ACCURACY_HELD = 0.3
#: The /proc/cpuinfo flags of bfloat16 arithmetic: x86's and Arm's.
BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16", "svebf16"})
#: Those with which a bf16 epoch was measured faster than fp32's (docs/results.md): AMX's
#: bfloat16 tiles. With AVX512_BF16 alone (an Emerald Rapids whose hypervisor hides AMX),
#: torch's bfloat16 GEMMs ran slower than its float32 ones and so did the bf16 epoch.
BFLOAT16_FASTER = frozenset({"amx_bf16"})


def bfloat16_instructions(cpuinfo: str | Path = "/proc/cpuinfo") -> list[str]:
    """The CPU's bfloat16 instruction flags, as the OS lists them (empty where it lists none
    or cannot be read).

    Args:
        cpuinfo: the file to read.

    Returns:
        The flags, sorted.
    """
    try:
        words = set(Path(cpuinfo).read_text().split())
    except OSError:
        return []
    return sorted(words & BFLOAT16_FLAGS)


@dataclass(frozen=True)
class Precision:
    """What a run computes in, and why.

    Args:
        asked: ``--precision`` as given.
        picked: ``fp32`` or ``bf16``.
        reason: why, in a line.
    """

    asked: str
    picked: str
    reason: str

    @property
    def bfloat16(self) -> bool:
        """Whether rows are stored and GEMMs run in bfloat16."""
        return self.picked == "bf16"

    def as_json(self) -> dict:
        """The header's record of it."""
        return {"asked": self.asked, "picked": self.picked, "reason": self.reason}


def choose(asked: str, model: str, method=None, instructions: list[str] | None = None) -> Precision:
    """The precision of a run (module docstring).

    Args:
        asked: ``fp32``, ``bf16`` or ``auto``.
        model: the model's name.
        method: the run's compared method's card, or None.
        instructions: this CPU's bfloat16 flags; None reads them (:func:`bfloat16_instructions`).

    Returns:
        The choice and its reason.
    """
    if asked != "auto":
        return Precision(asked, asked, "asked for")
    instructions = bfloat16_instructions() if instructions is None else instructions
    model_card = card(model)
    if method is not None and "bf16" not in method.precisions:
        return Precision(asked, "fp32", f"{method.title} computes in float32")
    if not instructions:
        return Precision(asked, "fp32", "this CPU has no bfloat16 instructions")
    if not BFLOAT16_FASTER & set(instructions):
        return Precision(asked, "fp32", f"this CPU has {', '.join(instructions)} but not "
                                        f"{', '.join(sorted(BFLOAT16_FASTER))}, without which bf16 was not measured "
                                        "faster than fp32 (docs/results.md)")
    if not model_card.bfloat16_auto:
        return Precision(asked, "fp32", f"{model_card.title}'s accuracy in bf16 is not shown within "
                                        f"{ACCURACY_HELD} points of fp32 (docs/results.md)")
    return Precision(asked, "bf16", f"this CPU has {', '.join(instructions)} and {model_card.title}'s accuracy in "
                                    f"bf16 held within {ACCURACY_HELD} points of fp32")


def eligible(model: str, method=None) -> bool:
    """Whether ``auto`` picks bf16 for runs of ``model`` (and ``method``) on a CPU with
    :data:`BFLOAT16_FASTER`'s instructions."""
    return card(model).bfloat16_auto and (method is None or "bf16" in method.precisions)


def study_conflicts(asked: str, runs) -> list[str]:
    """A study's refusal of ``precision: auto`` where its variants would not all pick the
    same (every variant of a study computes at one precision, so that they compare fairly).

    Args:
        asked: the study's ``training.precision``.
        runs: ``(display name, model, method card or None)`` of each variant.

    Returns:
        One message with its fix, or none.
    """
    if asked != "auto":
        return []
    picks = {name: eligible(model, method) for name, model, method in runs}
    if len(set(picks.values())) < 2:
        return []
    low = ", ".join(name for name, bf16 in picks.items() if bf16)
    high = ", ".join(name for name, bf16 in picks.items() if not bf16)
    return [f"precision: auto would compute {low} in bf16 and {high} in fp32 on a CPU with AMX-BF16, and the "
            "variants of a study compare at one precision — set training.precision: fp32, or leave out the "
            "variants that compute in float32"]


def agreed(precision: Precision, communicator) -> Precision:
    """``precision`` as every rank runs it: bf16 only where every rank picked it (a job
    across CPUs with and without AMX-BF16 runs float32 everywhere). Collective.

    Args:
        precision: this rank's choice.
        communicator: the job's :class:`~supergcn.distributed.comm.Communicator`.

    Returns:
        The same choice on every rank.
    """
    import numpy as np

    votes = communicator.allreduce_sum(np.array([int(precision.bfloat16)], dtype=np.int64))
    if precision.bfloat16 and int(votes[0]) < communicator.size:
        return Precision(precision.asked, "fp32", f"{communicator.size - int(votes[0])} of {communicator.size} "
                                                  "ranks' CPUs have no "
                                                  f"{', '.join(sorted(BFLOAT16_FASTER))}")
    return precision
