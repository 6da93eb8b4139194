"""What an executor refuses before it spends a GPU-hour, said in one line: a cluster that cannot place the work, an
sbatch file that cannot be written as asked."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """The cluster cannot run the work as asked (no GPUs to place an actor on, say); the message says what to do."""


class SlurmError(ValueError):
    """An sbatch array that cannot be made as asked (a stage that is not sharded, a missing option, a bad time)."""
