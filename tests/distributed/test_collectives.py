"""The collectives that keep replicas identical, held to single-process training."""

from pathlib import Path

import torch

from supergcn.distributed.collectives import allreduce_bytes, parameter_hash

from conftest import run_rank_job


def test_broadcast_and_gradient_allreduce_give_the_full_batch_gradient():
    run_rank_job(Path(__file__).with_name("collectives_job.py"), 3)


def test_parameter_hash_sees_every_tensor_and_name():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    before = parameter_hash(model)
    assert parameter_hash(model) == before
    model[1].running_mean[0] += 1  # a buffer, not a parameter
    assert parameter_hash(model) != before
    assert allreduce_bytes(list(model.parameters())) == (3 * 2 + 2 + 2 + 2 + 1) * 4
