"""Run by tests/distributed/test_collectives.py under ``mpiexec -n 3``: each rank holds a
different model and a shard of a regression problem; after the collectives every rank
must hold rank 0's model and the full-batch gradient and loss."""

import numpy as np
import torch
from mpi4py import MPI

from supergcn.distributed.collectives import allreduce_gradients, broadcast_parameters, parameter_hash
from supergcn.distributed.comm import Communicator

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
generator = torch.Generator().manual_seed(123)
x = torch.randn(30, 5, generator=generator)
y = torch.randn(30, 2, generator=generator)

torch.manual_seed(rank)  # a different start on every rank
model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
broadcast_parameters(model, comm)
torch.manual_seed(0)
rank0 = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), rank0.state_dict().values()))
assert len(set(comm.allgather(parameter_hash(model)))) == 1

# Each rank's loss is its shard's share of the mean over all 30 rows.
shard = np.array_split(np.arange(30), size)[rank]
loss = ((model(x[shard]) - y[shard]) ** 2).sum() / len(x)
loss.backward()
total = allreduce_gradients(list(model.parameters()), loss, Communicator(comm))

full_loss = ((rank0(x) - y) ** 2).sum() / len(x)
full_loss.backward()
assert abs(total - full_loss.item()) < 1e-5, (total, full_loss.item())
for mine, reference in zip(model.parameters(), rank0.parameters()):
    torch.testing.assert_close(mine.grad, reference.grad, rtol=1e-5, atol=1e-6)
print(f"rank {rank} ok", flush=True)
