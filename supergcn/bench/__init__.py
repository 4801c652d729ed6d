"""Benchmarks of this machine and of the package's parts, the ``supergcn bench`` commands:
MPI exchanges and collectives, the aggregation kernels against their roofline and the
authors' kernel, quantization, the timing harness they share, and the fits of the machine's
parameters to their sweeps (:mod:`supergcn.bench.fits`). What the performance model
(:mod:`supergcn.perf`) predicts from such measurements lives there."""
