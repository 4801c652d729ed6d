"""Benchmarks of this machine and of the package's parts, the ``supergcn bench`` commands:
MPI exchanges and collectives, the aggregation kernels against their roofline and the
authors' kernel, quantization, and the timing harness they share. What the performance
model (:mod:`supergcn.perf`) predicts from such measurements lives there."""
