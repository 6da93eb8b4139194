"""A watch on a long job that says so when it stalls: when no chunk has finished for `after_s` seconds, a notice on
stderr naming what is running (and again each further `after_s`), so a cluster job never spends GPU-hours in silence.

The threshold is `RESEARCHY_SUBQ_STALL_MINUTES` (default 10): how the operator watches a job, not part of the
protocol, so it lives outside the profile and changing it never invalidates a shard.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

STALL_ENV = "RESEARCHY_SUBQ_STALL_MINUTES"
DEFAULT_MINUTES = 10.0


def stall_seconds() -> float:
    text = os.environ.get(STALL_ENV)
    if text is None:
        return DEFAULT_MINUTES * 60
    try:
        minutes = float(text)
    except ValueError:
        raise ValueError(f"{STALL_ENV}={text!r}: give minutes as a number, e.g. 10") from None
    if not minutes > 0:
        raise ValueError(f"{STALL_ENV}={text!r}: must be > 0")
    return minutes * 60


def stderr_notice(line: str) -> None:
    from generation.progress import console

    console.print(line, style="yellow", highlight=False, markup=False, soft_wrap=True)


class StallWatch:
    """`with StallWatch(describe) as watch: ... watch.beat()` after each finished chunk. `describe()` says what is
    running, at the moment of the notice."""

    def __init__(
        self, describe: Callable[[], str], after_s: float | None = None, notice: Callable[[str], None] = stderr_notice
    ):
        self.describe, self.notice = describe, notice
        self.after_s = stall_seconds() if after_s is None else after_s
        self.last = time.monotonic()
        self.notices = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)

    def beat(self) -> None:
        self.last = time.monotonic()

    def _watch(self) -> None:
        warned_at = None
        while not self._stop.wait(min(self.after_s / 4, 30.0)):
            quiet = time.monotonic() - self.last
            if quiet >= self.after_s and (
                warned_at is None or warned_at < self.last or time.monotonic() - warned_at >= self.after_s
            ):
                warned_at = time.monotonic()
                self.notices += 1
                try:
                    what = self.describe()
                except Exception as e:  # noqa: BLE001 - a notice must never break the job it watches
                    what = f"(could not describe the job: {e})"
                self.notice(f"stalled? no chunk finished for {quiet / 60:.1f} min: {what}")

    def __enter__(self) -> StallWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def describe_ray_job(executor, shard_label: str, pending: int, finished: int) -> str:
    """What a stalled Ray job is running: its actors, its chunks, and the cluster's free resources."""
    import ray

    free, total = ray.available_resources(), ray.cluster_resources()
    return (
        f"shard {shard_label} on {executor.description} ({executor.gpus_per_worker:g} GPUs per actor); "
        f"{finished} of {pending} chunks done; the cluster has {free.get('GPU', 0):g} of {total.get('GPU', 0):g} "
        f"GPUs and {free.get('CPU', 0):g} of {total.get('CPU', 0):g} CPUs free (actors waiting for resources, or a "
        "model still loading?); `ray status` and the actors' logs under /tmp/ray/session_latest/logs say more"
    )
