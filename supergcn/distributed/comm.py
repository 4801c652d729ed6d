"""Row exchanges between ranks over MPI (mpi4py), with per-peer byte counters.

Buffers are 2-D numpy arrays whose rows go to (or come from) the ranks in rank order,
``counts[r]`` rows for rank r. An MPI contiguous datatype spanning one row makes the
counts and displacements of Alltoallv *rows*, not elements, so messages of more than
2^31 elements need no chunking; only a single peer's row count must stay below 2^31,
which is checked with a clear error. Torch tensors are passed as zero-copy numpy views.

Progress. MPICH moves a nonblocking exchange only inside MPI calls, and between ranks of
one node it moves one shared-memory cell per call: with its default cells a 25 MB
Alltoallv between two ranks took 3,062 ``Test`` calls, with 256 KiB cells 100 (and the
blocking exchange ran 2-3x faster; docs/methods.md, "Where the epoch goes"). So the ranks ask for
:data:`SHM_CELL_BYTES` cells (:func:`configure_mpi`, before MPI starts; a user's own
setting wins), and a caller overlapping an exchange with work polls it about
:func:`polls_to_finish` times (:meth:`PendingExchange.test`) while the work runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from supergcn.errors import SuperGCNError

_MAX_COUNT = 2**31 - 1
#: What the bytes exchanged are counted under, per peer: rows (``data``), their
#: quantization parameters (``params``), attention's float32 scores, maxima and sums
#: (``attention``, :mod:`supergcn.models.gat.online_softmax`) and the int64 ids of rows
#: (``ids``: those BNS-GCN draws each epoch, those DistGNN-MB pushes).
MESSAGE_KINDS = ("data", "params", "attention", "ids")
#: Shared-memory cell size asked of MPICH (its pack buffer must be at least as large).
SHM_CELL_BYTES = 256 * 1024
_CELL_SIZE = "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE"
#: 16 cells instead of MPICH's 64 keep a rank's shared memory at 12 MiB (measured: 4 ranks
#: took 148 MB of /dev/shm with 64 cells of 256 KiB, 50 MB with 16, 21 MB with MPICH's
#: defaults); a 25 MB exchange took the same 100 polls and time with 16 cells as with 64.
MPICH_SETTINGS = {_CELL_SIZE: str(SHM_CELL_BYTES), "MPIR_CVAR_CH4_PACK_BUFFER_SIZE": str(SHM_CELL_BYTES),
                  "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS": "16"}


def configure_mpi() -> dict[str, str]:
    """Set :data:`MPICH_SETTINGS` in this process's environment where the user has not
    (other MPI libraries ignore them); call before MPI is initialised. Returns the
    values in effect."""
    for name, value in MPICH_SETTINGS.items():
        os.environ.setdefault(name, value)
    return {name: os.environ[name] for name in MPICH_SETTINGS}


#: Where MPICH's mmap shared memory keeps a node's segment: a file that stays linked until
#: MPI_Finalize (MPICH 5.0.2, measured), so a rank that never reaches it (an abort, a
#: scheduler's cancel, a kill) left it in /dev/shm, about 12 MiB a rank at these settings,
#: until the node rebooted.
MPICH_SEGMENT_PREFIX = "/dev/shm/mpich_shm_"


def unlink_shared_memory(comm, maps: str = "/proc/self/maps") -> list[str]:
    """Unlink the files of MPICH's shared-memory segments that this process maps, once every
    rank has attached them (a barrier of ``comm``, which must hold every rank of the job):
    the memory lives on until the last rank unmaps it, and nothing is left behind however
    the job ends, as UCX does with its own segments. MPICH's finalize does not miss the
    name (measured). Other MPI libraries' files, and systems without ``maps``: nothing.

    Args:
        comm: the job's world communicator.
        maps: the memory map that names this process's mapped files.

    Returns:
        The files this rank unlinked (another rank of its node may have been first).
    """
    comm.Barrier()
    try:
        with open(maps) as lines:
            mapped = {line.split(maxsplit=5)[5].rstrip("\n") for line in lines if MPICH_SEGMENT_PREFIX in line}
    except OSError:
        return []
    unlinked = []
    for path in sorted(mapped):
        if path.startswith(MPICH_SEGMENT_PREFIX) and not path.endswith(" (deleted)"):
            try:
                os.unlink(path)
                unlinked.append(path)
            except OSError:  # another rank of the node was first
                pass
    return unlinked


def polls_to_finish(nbytes: int) -> int:
    """About how many MPI calls move ``nbytes`` between two ranks of one node, at the
    cell size in effect (other MPI libraries and other nodes move more per call, so this
    errs towards polling too often, which costs microseconds)."""
    try:
        cell = max(1, int(os.environ.get(_CELL_SIZE, SHM_CELL_BYTES)))
    except ValueError:
        cell = SHM_CELL_BYTES
    return -(-int(nbytes) // cell)


@dataclass
class PendingExchange:
    """A started nonblocking exchange; ``wait()`` returns the received rows."""

    request: object
    received: np.ndarray
    send: np.ndarray  # MPI reads it until the exchange completes

    def wait(self) -> np.ndarray:
        self.request.Wait()
        return self.received

    def test(self) -> bool:
        """Let MPI move the exchange along; True once it is complete."""
        return self.request.Test()


@dataclass
class Arrived:
    """Rows already received (restored from a checkpoint), where a pending exchange stood:
    :meth:`wait` returns them at once and :meth:`test` says it is complete."""

    received: np.ndarray

    def wait(self) -> np.ndarray:
        return self.received

    def test(self) -> bool:
        return True


class Communicator:
    """Nonblocking Alltoallv of rows and the gradient all-reduce on an MPI communicator."""

    def __init__(self, comm) -> None:
        from mpi4py import MPI

        self._mpi = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.bytes_sent = {kind: np.zeros(self.size, dtype=np.int64) for kind in MESSAGE_KINDS}
        self.bytes_received = {kind: np.zeros(self.size, dtype=np.int64) for kind in MESSAGE_KINDS}
        self._row_types: dict[tuple[str, int], object] = {}

    def _row_type(self, dtype: np.dtype, width: int):
        from mpi4py.util.dtlib import from_numpy_dtype

        key = (np.dtype(dtype).str, width)
        if key not in self._row_types:
            base = from_numpy_dtype(np.dtype(dtype))
            row = base.Create_contiguous(max(width, 1))
            row.Commit()
            self._row_types[key] = row
        return self._row_types[key]

    def _specs(self, send: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray, kind: str,
               out: np.ndarray | None, displacements: tuple | None):
        if send.ndim != 2 or not send.flags.c_contiguous:
            raise ValueError("exchange buffers must be C-contiguous 2-D arrays")
        # Counts and displacements are in rows (one MPI datatype per row), and MPI's are int.
        if max(int(send_counts.sum()), int(recv_counts.sum())) > _MAX_COUNT:
            raise SuperGCNError("a rank would exchange more than 2^31-1 rows in one exchange", "use more ranks")
        if displacements is None:  # each peer's rows follow the previous peer's
            send_displs, recv_displs = (np.concatenate([[0], np.cumsum(counts)[:-1]])
                                        for counts in (send_counts, recv_counts))
        else:
            send_displs, recv_displs = (np.asarray(d, dtype=np.int64) for d in displacements)
            if max(int((send_displs + send_counts).max()), int((recv_displs + recv_counts).max())) > _MAX_COUNT:
                raise SuperGCNError("a rank's exchange buffer would span more than 2^31-1 rows", "use more ranks")
        width = send.shape[1]
        shape = (int((recv_displs + recv_counts).max(initial=0)), width)
        if out is None:
            received = np.empty(shape, dtype=send.dtype)
        elif (out.shape[0] < shape[0] if displacements is not None else out.shape != shape) \
                or out.shape[1] != width or out.dtype != send.dtype or not out.flags.c_contiguous:
            raise ValueError(f"receive buffer is {out.dtype} {out.shape}, the exchange needs {send.dtype} {shape}")
        else:
            received = out
        row = self._row_type(send.dtype, width)
        row_bytes = width * send.dtype.itemsize
        self.bytes_sent[kind] += send_counts * row_bytes
        self.bytes_received[kind] += recv_counts * row_bytes
        as_int = lambda a: np.asarray(a, dtype=np.int64).tolist()  # noqa: E731
        return ([send, (as_int(send_counts), as_int(send_displs)), row],
                [received, (as_int(recv_counts), as_int(recv_displs)), row], received)

    def ialltoallv(self, send: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray,
                   kind: str = "data", out: np.ndarray | None = None,
                   displacements: tuple[np.ndarray, np.ndarray] | None = None) -> PendingExchange:
        """Start sending ``send_counts[r]`` rows to each rank r; ``wait()`` on the result
        returns the rows received (into ``out`` when given). The pending exchange keeps
        ``send`` alive. ``displacements`` (send, receive; in rows) place each peer's rows
        where they are not simply one after another (the rank's own rows left in place)."""
        send_spec, recv_spec, received = self._specs(send, send_counts, recv_counts, kind, out, displacements)
        return PendingExchange(self.comm.Ialltoallv(send_spec, recv_spec), received, send)

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        """In-place global sum of a contiguous array (identical on every rank)."""
        self.comm.Allreduce(self._mpi.IN_PLACE, values, op=self._mpi.SUM)
        return values

    def close(self) -> None:
        for row in self._row_types.values():
            row.Free()
        self._row_types.clear()
