"""Per-rank wall-clock accounting of one training epoch.

An epoch is split into phases a user can act on (:data:`PHASES`), each timed forward
and backward:

* ``aggregation`` — the sparse aggregation kernels (and the GCN normalisation scalings);
* ``communication`` — the boundary exchanges of the GNN layers (Alltoallv);
* ``quantization`` — quantizing and dequantizing exchanged rows;
* ``synchronization`` — the barrier after backward: waiting for slower ranks;
* ``dense`` — the linear layers (GEMMs, bias, their weight and input gradients);
* ``elementwise`` — dropout, LayerNorm, ReLU, log-softmax and the loss, the label
  embedding and the input normalisation;
* ``optimizer`` — the gradient all-reduce (one flat buffer) and the Adam step;
* ``remainder`` — what the epoch's total leaves: autograd bookkeeping, Python, the
  label-propagation split.

The paper's Fig. 12 has five categories (aggregation, communication, quantization,
synchronization, other; "communication" is the exchange *in GCN layers*). They are sums
of the phases above (:data:`PAPER_CATEGORIES`): ``other`` = dense + elementwise +
optimizer + remainder. :meth:`PhaseTimer.breakdown` reports both.

Backward time is measured where autograd spends it: :meth:`PhaseTimer.timed` hooks the
backward nodes a forward call created (``Node.register_prehook`` / ``register_hook``),
so each node's execution is booked to the phase of the call that made it.

Every instant is booked once: the timer keeps the phases under way as a stack and, at each
phase's start and end, books the time since the previous one to the innermost phase (none
when the stack is empty). A phase entered inside another (a step called from a timed one,
a backward node running another's steps) takes its own time from the outer one, so the
phases never add up to more than the epoch, whatever the nesting or the clock's jitter.

The layers' formulas carry no timer: their steps are functions wrapped by :func:`phase`,
which book to the timer of the pass under way (:meth:`PhaseTimer.activate`, called as a
forward pass begins), so a layer's ``forward`` reads as its formula.
"""

from __future__ import annotations

import contextlib
import functools
import time

PHASES = ("aggregation", "communication", "quantization", "synchronization", "dense", "elementwise", "optimizer")
#: Every phase of an epoch, adding up to its total.
DETAIL = (*PHASES, "remainder")
#: The paper's Fig. 12 categories and the phases each one sums.
PAPER_CATEGORIES = {"aggregation": ("aggregation",), "communication": ("communication",),
                    "quantization": ("quantization",), "synchronization": ("synchronization",),
                    "other": ("dense", "elementwise", "optimizer", "remainder")}
#: The paper's categories, adding up to an epoch.
BREAKDOWN = tuple(PAPER_CATEGORIES)


class PhaseTimer:
    """Seconds per phase of :data:`PHASES` (or of ``phases``: another split of the same time),
    every instant booked once (module docstring).

    Args:
        phases: the phases it books to.
    """

    #: The timer the steps wrapped by :func:`phase` book to: one per rank, so one per process.
    active: PhaseTimer | None = None

    def __init__(self, phases: tuple[str, ...] = PHASES) -> None:
        self.phases = phases
        self.seconds = dict.fromkeys(phases, 0.0)
        self._under_way: list[str] = []  # the phases entered and not left, innermost last
        self._since = 0.0  # when the innermost phase was last booked to

    def activate(self) -> None:
        """Book the steps wrapped by :func:`phase` to this timer from now on."""
        PhaseTimer.active = self

    def reset(self) -> None:
        self.seconds = dict.fromkeys(self.phases, 0.0)

    def _enter(self, name: str) -> None:
        now = time.perf_counter()
        if self._under_way:
            self.seconds[self._under_way[-1]] += now - self._since
        self._under_way.append(name)
        self._since = now

    def _leave(self) -> None:
        now = time.perf_counter()
        self.seconds[self._under_way.pop()] += now - self._since
        self._since = now

    @contextlib.contextmanager
    def phase(self, name: str):
        self._enter(name)
        try:
            yield
        finally:
            self._leave()

    def timed(self, name: str, function, *inputs):
        """``function(*inputs)``, its forward and (where it builds a graph) its backward
        booked to phase ``name``; the inputs' own backward nodes are not included. The
        function may return a tensor or a tuple of them."""
        with self.phase(name):
            output = function(*inputs)
        roots = [getattr(tensor, "grad_fn", None) for tensor in (output if isinstance(output, tuple) else (output,))]
        if any(root is not None for root in roots):
            self._hook_backward(name, roots, {getattr(x, "grad_fn", None) for x in inputs} - {None})
        return output

    def _hook_backward(self, name: str, roots: list, boundary: set) -> None:
        def before(_grad_outputs):
            self._enter(name)

        def after(_grad_inputs, _grad_outputs):
            self._leave()

        pending, seen = list(roots), set(boundary)
        while pending:
            node = pending.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            node.register_prehook(before)
            node.register_hook(after)
            pending.extend(child for child, _ in node.next_functions)

    def breakdown(self, total: float) -> dict[str, float]:
        """Every phase of :data:`DETAIL`, the paper's categories and ``total`` for an epoch
        of ``total`` seconds."""
        seconds = dict(self.seconds)
        seconds["remainder"] = max(0.0, total - sum(seconds.values()))
        for category, phases in PAPER_CATEGORIES.items():
            seconds[category] = sum(seconds[p] for p in phases)
        seconds["total"] = total
        return seconds


def phase(name: str):
    """A decorator: the function's calls (forward and backward) booked to phase ``name`` of
    the active timer (:meth:`PhaseTimer.activate`), or run as they are where none is. The
    wrapped function takes positional arguments; a wrapped step called inside another books
    its time to its own phase, not to both.

    Args:
        name: a phase of :data:`PHASES`.

    Returns:
        The decorator.
    """
    def decorate(function):
        @functools.wraps(function)
        def timed(*inputs):
            timer = PhaseTimer.active
            return function(*inputs) if timer is None else timer.timed(name, function, *inputs)
        return timed
    return decorate
