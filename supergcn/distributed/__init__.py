"""Distributed runtime: the MPI communicator, collective error handling, the distributed
aggregation operator, the parameter and gradient collectives, and phase timing."""
