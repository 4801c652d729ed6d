"""The collectives that keep every rank's replica of the model identical.

* :func:`broadcast_parameters` gives every rank rank 0's parameters and buffers once,
  before training starts;
* :func:`allreduce_gradients` sums every parameter gradient, and the loss, over the
  ranks in one all-reduce. Each rank's loss is its share of the global loss (divided by
  the GLOBAL number of loss nodes), so the summed gradient is the gradient of the
  single-process full-batch loss;
* :func:`parameter_hash` fingerprints a replica, so a run can show that all stayed equal.
"""

from __future__ import annotations

import hashlib

import torch

from supergcn.distributed.comm import Communicator


def broadcast_parameters(model: torch.nn.Module, comm, root: int = 0) -> None:
    """Overwrite every tensor of ``model.state_dict()`` with rank ``root``'s, in place."""
    for tensor in model.state_dict().values():
        comm.Bcast(tensor.numpy(), root=root)


def allreduce_gradients(parameters: list[torch.nn.Parameter], loss: torch.Tensor, communicator: Communicator) -> float:
    """Replace each parameter's gradient by its sum over ranks; return the summed loss.

    The gradients and the loss travel as one flat float32 buffer (one Allreduce call).
    """
    flat = torch.cat([p.grad.reshape(-1) for p in parameters] + [loss.detach().reshape(1)]).numpy()
    communicator.allreduce_sum(flat)
    offset = 0
    for p in parameters:
        p.grad.copy_(torch.from_numpy(flat[offset:offset + p.numel()]).view_as(p))
        offset += p.numel()
    return float(flat[-1])


def allreduce_bytes(parameters: list[torch.nn.Parameter]) -> int:
    """Bytes of the buffer :func:`allreduce_gradients` reduces: every gradient and the loss."""
    return (sum(p.numel() for p in parameters) + 1) * 4


def parameter_hash(model: torch.nn.Module) -> str:
    """A hash of every tensor of ``model.state_dict()`` (names and bytes)."""
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()
