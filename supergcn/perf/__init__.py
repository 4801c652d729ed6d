"""The performance model: machine profiles (their parameters fitted by :mod:`supergcn.bench.fits`
to measurements), what a training epoch exchanges and gathers, the predicted times (paper
Eqs. 2-8), the plan-only study at the paper's process counts and communication volumes."""
