"""Performance: the communication performance model (paper Eqs. 2-8), machine profiles, the
plan-only study, the kernel / quantization / MPI benchmarks and communication volumes."""
