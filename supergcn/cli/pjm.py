"""``supergcn pjm``: Fujitsu PJM (Fugaku) wrappers for Snakemake's cluster-generic executor."""

from __future__ import annotations

from supergcn.cli._args import positive_int
from supergcn.options import Range

HELP = "Fujitsu PJM (Fugaku) wrappers for Snakemake's cluster-generic executor"


def configure(parser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    submit = actions.add_parser("submit", help="pjsub a Snakemake job script; prints the job id")
    submit.add_argument("--site", required=True, help="site file with a pjm: section (config/fugaku.yaml)")
    submit.add_argument("--name", default="supergcn")
    submit.add_argument("--nodes", type=positive_int, required=True)
    submit.add_argument("--procs", type=positive_int, required=True, help="MPI processes")
    submit.add_argument("--threads", type=positive_int, required=True, help="threads per process")
    submit.add_argument("--elapse-minutes", type=positive_int, required=True)
    submit.add_argument("--ranks-per-node", type=Range(int, 0), default=0,
                        help="ranks a node takes: the study's execution.ranks_per_node, which Snakemake hands a rank "
                        "job as a resource (0 = the site file's)")
    submit.add_argument("--log-dir", default="logs/pjm")
    submit.add_argument("jobscript")
    status = actions.add_parser("status", help="print running / success / failed for a job id")
    status.add_argument("--state-dir", default="logs/pjm", help="where jobs pjstat does not list yet are noted")
    status.add_argument("--missing-timeout", type=float, default=600.0,
                        help="seconds a job may go unlisted by pjstat before it counts as failed")
    status.add_argument("--max-age", type=float, default=20.0,
                        help="seconds one pjstat listing of all jobs serves every status query")
    status.add_argument("job_id")


def run(args) -> None:
    """Submit or query (:mod:`supergcn.cluster.pjm`); cancelling is `pjdel` itself."""
    from supergcn.cluster import pjm

    if args.action == "submit":
        print(pjm.submit(args.jobscript, args.site, args.name, args.nodes, args.procs, args.threads,
                         args.elapse_minutes, args.log_dir, ranks_per_node=args.ranks_per_node))
    else:
        print(pjm.status(args.job_id, args.state_dir, args.missing_timeout, args.max_age))
