"""Distributed runtime: the MPI communicator, collective error handling, a rank's exchange
and the differentiable aggregation a layer calls, the parameter and gradient collectives,
and phase timing. The methods that change the exchange live in :mod:`supergcn.methods`,
the models that aggregate through it in :mod:`supergcn.models`."""
