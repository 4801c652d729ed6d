"""``supergcn train``: distributed full-batch training, one MPI rank per partition.

Every option's default is the matching field of :class:`supergcn.train.config.TrainConfig`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from supergcn.cli._args import (
    bits,
    fraction,
    non_negative_float,
    non_negative_int,
    output_file,
    positive_int,
    schedule,
)
from supergcn.errors import SuperGCNError
from supergcn.naming import BIT_CHOICES, DENSE_DTYPES, GNN_MODELS, KERNELS, LABEL_DRAWS, PARAMETER_DTYPES, ROUNDINGS
from supergcn.train.config import UPSTREAM_LABEL_RATE, TrainConfig, default

HELP = "distributed full-batch training (run under mpiexec -n P)"
#: Epochs allocate the same large tensors again and again: run with jemalloc where it exists.
RETAINING_ALLOCATOR = True


def configure(parser) -> None:
    parser.description = "Run as `mpiexec -n P supergcn train ...`, P = the plan's rank count."
    data = parser.add_argument_group("inputs and outputs")
    data.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    data.add_argument("--partition", required=True, type=Path, help="partition directory of that graph")
    data.add_argument("--plan", required=True, type=Path, help="plan directory of that partition")
    data.add_argument("--out", required=True, type=output_file, help="metrics file (JSON lines) to write")
    model = parser.add_argument_group("model and optimisation (defaults: the paper's Table 2)")
    model.add_argument("--model", choices=GNN_MODELS, default=default("model"))
    model.add_argument("--num-layers", type=positive_int, default=default("num_layers"))
    model.add_argument("--hidden", type=positive_int, default=default("hidden"))
    model.add_argument("--dropout", type=fraction, default=default("dropout"), help="dropout probability, in [0, 1)")
    model.add_argument("--layer-norm", action=argparse.BooleanOptionalAction, default=default("layer_norm"))
    model.add_argument("--lr", type=non_negative_float, default=default("lr"))
    model.add_argument("--weight-decay", type=non_negative_float, default=default("weight_decay"))
    model.add_argument("--epochs", type=positive_int, default=default("epochs"))
    model.add_argument("--seed", type=int, default=default("seed"))
    model.add_argument("--label-rate", type=fraction, default=default("label_rate"),
                       help="masked label propagation: share of training labels fed as inputs each epoch "
                            f"(0 = off; the paper uses {UPSTREAM_LABEL_RATE})")
    model.add_argument("--label-draw", choices=LABEL_DRAWS, default=default("label_draw"),
                       help="label inputs each epoch: exactly the rate's share of the training nodes, or each "
                            "node with the rate's probability and the loss over the expected count (upstream)")
    model.add_argument("--input-norm", action=argparse.BooleanOptionalAction, default=default("input_norm"),
                       help="LayerNorm on the input features before the first layer")
    model.add_argument("--dense-dtype", choices=DENSE_DTYPES, default=default("dense_dtype"),
                       help="type the linear layers' GEMMs run in; bfloat16 is about 3x faster where the CPU has "
                            "bf16 matrix instructions (AVX512_BF16, AMX, SVE BF16), at bf16 precision")
    model.add_argument("--aggregate-first", action=argparse.BooleanOptionalAction, default=default("aggregate_first"),
                       help="aggregate before every linear layer, as upstream SuperGCN (exchanges input-width rows); "
                            "by default a layer narrowing its width transforms first and exchanges fewer bytes")
    run_group = parser.add_argument_group("execution")
    run_group.add_argument("--threads", type=positive_int, default=default("threads"),
                           help="torch and numba threads per rank")
    run_group.add_argument("--kernel", choices=KERNELS, default=default("kernel"),
                           help="sparse kernels: numba (optimised, default) or torch (torch.sparse.mm reference)")
    exchange = parser.add_argument_group("boundary exchange while training (evaluation is always float32)")
    exchange.add_argument("--bits", type=bits, choices=BIT_CHOICES, default=default("bits"),
                          help="32 = float32; 8, 4, 2 = per-row quantized embeddings and gradients; adaptive = "
                               "2, 4 or 8 per message group, assigned by AdaQP's solver")
    exchange.add_argument("--adaptive-weight", type=non_negative_float, default=default("adaptive_weight"),
                          help="adaptive bits: lambda, the weight of quantization variance against exchange time "
                               "(1 = all 8 bits, 0 = all 2 bits; AdaQP uses 0.5)")
    exchange.add_argument("--adaptive-group-size", type=positive_int, default=default("adaptive_group_size"),
                          help="adaptive bits: rows per message group sharing a width")
    exchange.add_argument("--adaptive-period", type=positive_int, default=default("adaptive_period"),
                          help="adaptive bits: epochs between re-assignments (traced in epoch 1, 1 + period, ...)")
    exchange.add_argument("--rounding", choices=ROUNDINGS, default=default("rounding"),
                          help="quantization rounding: nearest (upstream) or stochastic (unbiased, AdaQP)")
    exchange.add_argument("--parameter-dtype", choices=tuple(PARAMETER_DTYPES), default=default("parameter_dtype"),
                          help="wire type of the per-row zero point and scale")
    exchange.add_argument("--schedule", type=schedule, default=default("schedule"),
                          help="sync (every epoch), or DistGNN's delayed partial aggregates: cd-<r> (a bucket of "
                               "them per epoch, added r epochs later; cd-0 = sync) or 0c (never)")
    exchange.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=default("overlap"),
                          help="overlap the exchange with the local aggregation")
    run_group.add_argument("--checkpoint", type=output_file, help="checkpoint file (written atomically)")
    run_group.add_argument("--checkpoint-every", type=non_negative_int, default=default("checkpoint_every"),
                           help="epochs between checkpoints (0 = never)")
    run_group.add_argument("--resume", action="store_true", help="continue from --checkpoint when it exists")
    run_group.add_argument("--init-weights", type=Path, help="state_dict to start from instead of the seeded init")
    run_group.add_argument("--save-model", type=output_file, help="write the final state_dict here")
    run_group.add_argument("--save-logits", type=output_file, help="final log-probabilities (original node order)")
    # Fault injection for the tests of the abort path; not for users.
    run_group.add_argument("--fail-at-epoch", type=int, help=argparse.SUPPRESS)
    run_group.add_argument("--fail-rank", type=int, default=default("fail_rank"), help=argparse.SUPPRESS)


def config_of(args) -> TrainConfig:
    """The :class:`TrainConfig` the parsed ``args`` describe."""
    return TrainConfig(**{field: getattr(args, field) for field in TrainConfig.__dataclass_fields__})


def run(args) -> int:
    """Train on ``MPI.COMM_WORLD`` (:func:`supergcn.train.trainer.train`); every rank runs this."""
    from supergcn.distributed.comm import configure_mpi

    config = config_of(args)
    conflicts = config.conflicts()
    if conflicts:
        raise SuperGCNError("; ".join(conflicts))
    configure_mpi()
    from mpi4py import MPI

    from supergcn.distributed.ranks import run_ranked
    from supergcn.train.trainer import train

    return run_ranked(lambda comm: train(config, comm), MPI.COMM_WORLD, "train", args.debug)
