"""Executors run a stage's work: `local` in this process, `ray` on Ray actors (chunks of a shard across GPUs and
nodes), `slurm` as a generated sbatch array over the shards. They own no stage logic: a stage hands them its
`ChunkedWork` (generation/stages/base.py)."""

from __future__ import annotations

from generation.executors.local import LocalExecutor
from generation.executors.ray import RayExecutor


def executor_for(profile):
    """The executor a profile asks for: Ray actors over `ray_backend` when the judge's backend is `ray`."""
    config = profile.judge
    if config.backend == "ray":
        return RayExecutor(config.ray_workers, config.ray_backend, gpus_per_worker(config))
    return LocalExecutor()


def gpus_per_worker(config) -> float:
    if config.ray_backend == "vllm":
        return float(config.tensor_parallel_size)
    return 0.0 if config.device == "cpu" else 1.0
