"""Phase accounting: forward and backward booked to the phase of the call that built them."""

import time

import pytest
import torch

from supergcn.distributed.timing import BREAKDOWN, DETAIL, PAPER_CATEGORIES, PhaseTimer


class SlowBackward(torch.autograd.Function):
    """Identity whose backward takes ``delay`` seconds."""

    @staticmethod
    def forward(ctx, x, delay):
        ctx.delay = delay
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.delay)
        return grad, None


def test_backward_is_booked_to_the_phase_that_built_it():
    timer = PhaseTimer()
    x = torch.ones(3, requires_grad=True)
    first = timer.timed("dense", SlowBackward.apply, x, 0.05)
    second = timer.timed("elementwise", lambda y: SlowBackward.apply(y * 2, 0.1), first)
    forward = dict(timer.seconds)
    second.sum().backward()
    assert timer.seconds["dense"] - forward["dense"] == pytest.approx(0.05, abs=0.02)
    assert timer.seconds["elementwise"] - forward["elementwise"] == pytest.approx(0.1, abs=0.02)
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))


def test_calls_without_a_graph_are_timed_forward_only():
    timer = PhaseTimer()
    with torch.no_grad():
        out = timer.timed("dense", lambda: (time.sleep(0.02), torch.ones(2, requires_grad=True) * 2)[1])
    assert out.grad_fn is None and timer.seconds["dense"] >= 0.02


def test_breakdown_adds_up_in_both_views():
    timer = PhaseTimer()
    for k, phase in enumerate(timer.seconds):
        timer.seconds[phase] = 0.1 * (k + 1)
    seconds = timer.breakdown(5.0)
    assert sum(seconds[p] for p in DETAIL) == pytest.approx(5.0)
    assert sum(seconds[c] for c in BREAKDOWN) == pytest.approx(5.0)
    assert seconds["other"] == pytest.approx(sum(seconds[p] for p in PAPER_CATEGORIES["other"]))
    assert sorted(p for phases in PAPER_CATEGORIES.values() for p in phases) == sorted(DETAIL)


class BackwardWithAStep(torch.autograd.Function):
    """Identity whose backward sleeps ``delay`` seconds, then runs a step of phase
    ``aggregation`` that sleeps as long (as an exchange's backward runs its kernels)."""

    @staticmethod
    def forward(ctx, x, timer, delay):
        ctx.timer, ctx.delay = timer, delay
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.delay)
        with ctx.timer.phase("aggregation"):
            time.sleep(ctx.delay)
        return grad, None, None


def test_a_phase_inside_another_takes_its_time_from_it_and_nothing_is_booked_twice():
    timer = PhaseTimer()
    x = torch.ones(3, requires_grad=True)
    started = time.perf_counter()
    with timer.phase("dense"):
        time.sleep(0.05)
        with timer.phase("quantization"):
            time.sleep(0.05)
    out = timer.timed("communication", BackwardWithAStep.apply, x, timer, 0.05)
    out.sum().backward()
    elapsed = time.perf_counter() - started
    for phase in ("dense", "quantization", "communication", "aggregation"):
        assert timer.seconds[phase] == pytest.approx(0.05, abs=0.02), phase
    assert sum(timer.seconds.values()) <= elapsed
    seconds = timer.breakdown(elapsed)
    assert sum(seconds[p] for p in DETAIL) == pytest.approx(elapsed, rel=1e-9)
