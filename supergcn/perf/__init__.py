"""The performance model: machine profiles fitted from measurements (:mod:`supergcn.bench`
takes them), what a training epoch exchanges and gathers, the predicted times (paper Eqs.
2-8), the plan-only study at the paper's process counts and communication volumes."""
