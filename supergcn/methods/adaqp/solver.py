"""AdaQP's bit-width assignment (Wan et al., MLSys '23, §4.2, Problem 12), solved as a MILP.

Messages are the rows one rank sends another in one exchange. AdaQP groups them (per
sender, receiver and exchange: rows sorted by their variance weight beta, cut into
groups of ``group_size``) and gives every group g a width b_g in {2, 4, 8}. Stochastic
rounding of a row of D values spanning [min, max] to b bits has variance
D (max - min)^2 / (6 (2^b - 1)^2) (AdaQP Theorem 1), and the row reaches the aggregation
multiplied by its coefficients alpha, so group g contributes

    V_g(b) = beta_g / (2^b - 1)^2,     beta_g = sum_{rows k in g} sum_v alpha_{v,k}^2 D (max_k - min_k)^2 / 6.

The exchange's time is that of its slowest sender, each sender paying the cost of our
performance model (:mod:`supergcn.perf.prediction`, Eq. 2): the latencies of its messages plus
its bytes over its bandwidth,

    T = max_i ( L + sum_{g sent by i} n_g D b_g / 8 / bandwidth_i ).

L is the same for every assignment. Training passes one bandwidth for all ranks and no
latency, as our model has one bandwidth per rank; then the normalised T is the slowest
sender's bytes whatever the machine, and only per-rank bandwidths (nodes with unequal
links) would make the machine matter.

Problem 12 minimises lambda V + (1 - lambda) T. As in AdaQP's code, both terms are first
normalised between their best and worst values over the uniform assignments (utopia: V
at 8 bits, T at 2 bits; nadir: V at 2 bits, T at 8 bits), so lambda weighs comparable
numbers. The MILP (binary x_{g,b}, sum_b x_{g,b} = 1, continuous Z >= each sender's time)
is solved by HiGHS through :func:`scipy.optimize.milp`.

Ties. Only the slowest sender's bytes enter T, so with lambda = 0 the others could send
at any width, and a group of rows with no spread (beta = 0) costs no variance at any
width: such groups go at 2 bits, which cannot make the objective worse.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from supergcn.errors import SuperGCNError

#: The widths AdaQP chooses from.
WIDTHS = (2, 4, 8)
#: HiGHS stops within this relative gap of its bound (its default is 1e-4) or after this
#: many seconds, keeping its best assignment; the gap reached is recorded. Thousands of
#: groups (a group size of 100 on a graph of arxiv's size) take seconds to minutes to
#: prove optimal, while the best assignment is found early.
SOLVER_OPTIONS = {"mip_rel_gap": 1e-4, "time_limit": 10.0}


@dataclass(frozen=True)
class Groups:
    """The message groups of one exchange: their variance weight, rows, width and sender."""

    beta: np.ndarray     # beta_g
    rows: np.ndarray     # n_g
    sender: np.ndarray   # rank sending group g
    width: int           # D, values per row

    def variance(self) -> np.ndarray:
        """V_g(b) for every group (rows) and width of :data:`WIDTHS` (columns)."""
        levels = np.array([(2**b - 1) ** 2 for b in WIDTHS], dtype=np.float64)
        return self.beta[:, None] / levels[None, :]

    def data_bytes(self) -> np.ndarray:
        """Bytes of every group (rows) at every width (columns)."""
        return self.rows[:, None].astype(np.float64) * self.width * np.array(WIDTHS, dtype=np.float64)[None, :] / 8


@dataclass(frozen=True)
class Assignment:
    bits: np.ndarray     # b_g
    objective: float     # the minimised normalised objective
    seconds: float       # solver wall time
    gap: float = 0.0     # the solver's relative gap to its bound when it stopped


def objective_terms(groups: Groups, choice: np.ndarray, num_ranks: int, latency_s: float,
                    bandwidth_bytes_per_s: np.ndarray) -> tuple[float, float, float]:
    """(V, T, bytes) of assigning width index ``choice[g]`` to every group."""
    index = np.arange(len(groups.beta))
    data = groups.data_bytes()[index, choice]
    per_rank = np.bincount(groups.sender, weights=data, minlength=num_ranks) / bandwidth_bytes_per_s
    return float(groups.variance()[index, choice].sum()), float((per_rank + latency_s).max()), float(data.sum())


def solve(groups: Groups, weight: float, num_ranks: int, latency_s: float = 0.0,
          bandwidth_bytes_per_s: float | np.ndarray = 1.0) -> Assignment:
    """The widths minimising AdaQP's normalised objective with ``weight`` = lambda (module docstring)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    if not 0 <= weight <= 1:
        raise SuperGCNError(f"the variance weight lambda must lie in [0, 1], got {weight}",
                            "pass --adaptive-weight in [0, 1]")
    bandwidth = np.broadcast_to(np.asarray(bandwidth_bytes_per_s, dtype=np.float64), (num_ranks,))
    num_groups, num_widths = len(groups.beta), len(WIDTHS)
    started = time.perf_counter()
    if num_groups == 0:
        return Assignment(np.empty(0, dtype=np.int64), 0.0, 0.0, 0.0)
    uniform = {b: objective_terms(groups, np.full(num_groups, k), num_ranks, latency_s, bandwidth)
               for k, b in enumerate(WIDTHS)}
    v_best, v_worst = uniform[8][0], uniform[2][0]
    t_best, t_worst = uniform[2][1], uniform[8][1]
    v_span = v_worst - v_best if v_worst > v_best else 1.0
    t_span = t_worst - t_best if t_worst > t_best else 1.0
    # Variables: x_{g,b} (g-major), then z = (Z - T_best) / T_span, the normalised time, so
    # that every coefficient is of order one (seconds of microseconds defeat the tolerances).
    num_x = num_groups * num_widths
    objective = np.concatenate([(weight / v_span * groups.variance()).ravel(), [1 - weight]])
    # Sparse constraints: a group's row has its three widths, a sender's row its groups' and
    # z; dense ones would be G x 3G (terabytes for papers100M's groups).
    one_width = sp.csr_matrix((np.ones(num_x), (np.repeat(np.arange(num_groups), num_widths), np.arange(num_x))),
                              shape=(num_groups, num_x + 1))
    # Each sender: latency + its groups' seconds <= Z, i.e. seconds / T_span - z <= (T_best - latency) / T_span.
    seconds = groups.data_bytes() / bandwidth[groups.sender][:, None]
    slowest = sp.csr_matrix((np.concatenate([seconds.ravel() / t_span, -np.ones(num_ranks)]),
                             (np.concatenate([np.repeat(groups.sender, num_widths), np.arange(num_ranks)]),
                              np.concatenate([np.arange(num_x), np.full(num_ranks, num_x)]))),
                            shape=(num_ranks, num_x + 1))
    problem = {"integrality": np.concatenate([np.ones(num_x), [0]]),
               "bounds": Bounds(np.concatenate([np.zeros(num_x), [-np.inf]]),
                                np.concatenate([np.ones(num_x), [np.inf]])),
               "constraints": [LinearConstraint(one_width, 1, 1),
                               LinearConstraint(slowest, -np.inf, np.full(num_ranks, (t_best - latency_s) / t_span))]}
    result = _solved(milp(objective, **problem, options=SOLVER_OPTIONS))
    choice = result.x[:num_x].reshape(num_groups, num_widths).argmax(axis=1)
    # Ties: where a group's variance does not count (lambda = 0, or no spread), 2 bits cost
    # nothing and T cannot grow, so the fewest bytes are as good.
    choice[(weight * groups.beta) == 0] = WIDTHS.index(min(WIDTHS))
    variance, slowest_time, _ = objective_terms(groups, choice, num_ranks, latency_s, bandwidth)
    normalised = weight * (variance - v_best) / v_span + (1 - weight) * (slowest_time - t_best) / t_span
    return Assignment(np.array(WIDTHS)[choice], normalised, time.perf_counter() - started,
                      float(getattr(result, "mip_gap", 0.0) or 0.0))


def _solved(result):
    """The solver's result if it holds an assignment (optimal, or the best at the time limit)."""
    if result.x is None:
        raise SuperGCNError(f"the bit-width assignment could not be solved: {result.message}",
                            "train with --bits 2, 4 or 8 instead of adaptive")
    return result
