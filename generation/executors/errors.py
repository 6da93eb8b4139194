"""What an executor refuses before it spends a GPU-hour: a cluster that cannot place the work, said in one line."""
from __future__ import annotations


class ClusterError(RuntimeError):
    """The cluster cannot run the work as asked (no GPUs to place an actor on, say); the message says what to do."""
