"""The trainer's optimizer: ``torch.optim.Adam`` itself, without importing torch's compiler.

torch.optim guards every optimizer against ``torch.compile``: ``Optimizer.__init__``,
``zero_grad``, ``add_param_group``, ``state_dict`` and ``load_state_dict`` are wrapped by
``torch._disable_dynamo``, and ``step`` by ``_use_grad_for_differentiable``. Each wrapper
imports ``torch._dynamo`` on its first call, whether anything is compiled or not: about
800 more modules (sympy and mpmath among them), 1.0 s of one core per process on the
development machine, in every rank of every run, from the shared file system at scale.

Nothing can be under compilation while ``torch._dynamo`` has not been imported
(``torch.compile`` imports it), and until then the wrappers do nothing but import it. So
:func:`adam` returns a subclass of ``torch.optim.Adam`` whose guarded methods call torch's
own functions directly while ``torch._dynamo`` is not in ``sys.modules``, and go through
torch's guards, as ``torch.optim.Adam`` does, once it is. The update is torch's,
unchanged: ``step`` is ``torch.optim.Adam.step`` unwrapped, under the grad mode its guard
sets.

It leans on three private details of torch (``_disable_dynamo``'s wrapper caching its
guard as ``fn.__dynamo_disable``, ``step``'s ``__wrapped__`` chain, and
``torch.optim.optimizer._use_grad_for_differentiable``); where one is missing, the methods
it concerns keep torch's guards (:func:`adam` then returns ``torch.optim.Adam``) and
import the compiler as before (``tests/train/test_optimizer.py`` shows the import
skipped and the bits unchanged).
"""

from __future__ import annotations

import inspect
import sys

import torch

#: The module whose import the guards wait for.
COMPILER = "torch._dynamo"


def compiler_loaded() -> bool:
    """Whether ``torch._dynamo`` has been imported in this process (else nothing compiles).

    Returns:
        True once it is in ``sys.modules``.
    """
    return COMPILER in sys.modules


def _guard_when_loaded(function, recursive: bool):
    """``function`` called directly until the compiler is loaded, then behind torch's guard."""
    guarded = None

    def call(*args, **kwargs):
        nonlocal guarded
        if guarded is None:
            if not compiler_loaded():
                return function(*args, **kwargs)
            import torch._dynamo

            guarded = torch._dynamo.disable(function, recursive, wrapping=False)
        return guarded(*args, **kwargs)
    return call


def _defer_guards(cls) -> None:
    """Give each method of ``cls`` wrapped by ``torch._disable_dynamo`` a guard that waits
    for the compiler: the wrapper calls what it finds cached on the wrapped function."""
    try:
        from torch._compile import _disable_dynamo
    except ImportError:  # another torch: its guards stay as they are
        return
    wrapper_code = _disable_dynamo(lambda: None).__code__
    for member in vars(cls).values():
        if getattr(member, "__code__", None) is not wrapper_code or not hasattr(member, "__wrapped__"):
            continue
        function = member.__wrapped__
        if getattr(function, "__dynamo_disable", None) is None:
            recursive = inspect.getclosurevars(member).nonlocals.get("recursive", True)
            setattr(function, "__dynamo_disable", _guard_when_loaded(function, recursive))


def _unguarded_step():
    """``torch.optim.Adam.step`` without its wrappers, and the grad-mode guard it had; None
    where torch's wrapping is not the one this module knows."""
    try:
        from torch.optim.optimizer import _use_grad_for_differentiable
    except ImportError:
        return None
    step = inspect.unwrap(torch.optim.Adam.step)
    return (step, _use_grad_for_differentiable(step)) if step is not torch.optim.Adam.step else None


class _Adam(torch.optim.Adam):
    """``torch.optim.Adam`` (module docstring): the same update, in the same order, on the
    same state; its ``step`` skips the compiler's guard while the compiler is not loaded."""

    def step(self, closure=None):
        """One Adam update of every parameter with a gradient (``torch.optim.Adam.step``).

        Args:
            closure: re-evaluates the model and returns the loss; None for none.

        Returns:
            The closure's loss, or None.
        """
        step, guarded = _STEP
        if compiler_loaded():
            return guarded(self, closure)
        # _use_grad_for_differentiable's grad mode; its graph breaks do nothing outside a compilation.
        with torch.set_grad_enabled(self.defaults["differentiable"]):
            return step(self, closure)


_defer_guards(torch.optim.Optimizer)
_STEP = _unguarded_step()


def adam(parameters, lr: float, weight_decay: float) -> torch.optim.Adam:
    """The trainer's Adam over ``parameters`` (module docstring): ``torch.optim.Adam``
    stepped without the compiler's guard, or ``torch.optim.Adam`` itself where its
    ``step`` is not wrapped as this module knows.

    Args:
        parameters: the tensors to optimise.
        lr: the learning rate.
        weight_decay: the L2 penalty's factor.

    Returns:
        A ``torch.optim.Adam``.
    """
    return (_Adam if _STEP is not None else torch.optim.Adam)(parameters, lr=lr, weight_decay=weight_decay)
