"""set_threads settles MKL's vector math on the calling thread before torch's threads share
any of its work (oneMKL 2024.2 races a process's first VML call: pytorch/pytorch#188792)."""

import torch
from torch.overrides import TorchFunctionMode

from supergcn.distributed.threads import MKL_VML_OPS, set_threads


class RecordedCalls(TorchFunctionMode):
    """Records each torch function called: its name, its first tensor's dtype and size, and
    torch's threads at the time."""

    def __init__(self):
        super().__init__()
        self.calls = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if args and isinstance(args[0], torch.Tensor):
            self.calls.add((getattr(func, "__name__", ""), args[0].dtype, args[0].numel(), torch.get_num_threads()))
        return func(*args, **(kwargs or {}))


def test_set_threads_first_calls_each_mkl_vml_op_on_one_element_in_both_float_widths():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with RecordedCalls() as recorded:
            set_threads(2)
    finally:
        set_threads(threads)
    # Each op and width on one element (below torch's grain size: on this thread alone),
    # while torch still had the one thread it had before.
    wanted = {(name, dtype, 1, 1) for name in MKL_VML_OPS for dtype in (torch.float32, torch.float64)}
    assert wanted - recorded.calls == set()
    assert all(call[2:] == (1, 1) for call in recorded.calls if call[0] in MKL_VML_OPS)


def test_the_ops_settled_are_torch_functions_and_include_adams_square_root():
    # Adam's step takes the square root of its second moment: the call that raced in training.
    assert "sqrt" in MKL_VML_OPS
    for name in MKL_VML_OPS:
        one = torch.full((1,), 0.5)
        assert getattr(torch, name)(one).shape == one.shape
