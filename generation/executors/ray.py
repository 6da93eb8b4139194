"""The Ray executor: a shard's pending chunks as a Ray Data dataset mapped over actors. Each actor rebuilds the
shard's (deterministic) work from its recipe once, holds one worker (a judge on `backend`), and runs, writes and
commits whole chunks, so a lost worker costs only its chunk. Before any actor starts, the driver builds nothing
heavy but checks that the cluster has the GPUs the actors need, and refuses in one line when it has not."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from generation.executors.errors import ClusterError
from generation.executors.stall import StallWatch, describe_ray_job
from generation.shards import Shard


class ChunkActor:
    """A Ray Data actor: the work of one shard, rebuilt from its recipe, and a worker to run its chunks."""

    def __init__(self, stage_class: type, arguments: dict, shard_index: int, shard_count: int, backend: str | None):
        from generation.profiles import Profile
        from generation.shards import Shard

        arguments = dict(arguments)
        profile = Profile.model_validate_json(arguments.pop("profile_json"))
        stage = stage_class(profile, Path(arguments.pop("out")),
                            **{k: Path(v) if isinstance(v, str) else v for k, v in arguments.items()})
        stage.check_inputs()
        self.work = stage.chunk_work(Shard(shard_index, shard_count))
        self.worker = self.work.make_worker(backend)

    def __call__(self, batch: dict) -> dict:
        import numpy as np

        done = [self.work.run_chunk(int(k), self.worker) for k in batch["chunk"]]
        return {"chunk": np.asarray(batch["chunk"]), "rows": np.asarray(done)}


class RayExecutor:
    def __init__(self, workers: int, backend: str | None = None, gpus_per_worker: float = 0.0):
        self.workers, self.backend, self.gpus_per_worker = workers, backend, gpus_per_worker
        self.description = f"ray x{workers} over {backend}"

    def check_resources(self) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
        needed = self.gpus_per_worker * min(self.workers, 1)
        have = ray.cluster_resources().get("GPU", 0.0)
        if needed > have:
            raise ClusterError(f"Ray: each of the {self.workers} actors needs {self.gpus_per_worker:g} GPUs and the "
                               f"cluster has {have:g}; start Ray on GPU nodes (`ray start --head --num-gpus N`), or "
                               "set judge.device: cpu / fewer ray_workers")

    def run_chunks(self, work, pending: Sequence[int], progress=None) -> int:
        import ray

        work.preflight(self.backend)
        self.check_resources()
        stage_class, arguments, shard_index, shard_count = work.recipe()
        dataset = ray.data.from_items([{"chunk": k} for k in pending]).map_batches(
            ChunkActor, batch_size=1, concurrency=self.workers, num_gpus=self.gpus_per_worker,
            fn_constructor_kwargs={"stage_class": stage_class, "arguments": arguments, "shard_index": shard_index,
                                   "shard_count": shard_count, "backend": self.backend})
        done, finished = 0, 0
        label = Shard(shard_index, shard_count).label
        with StallWatch(lambda: describe_ray_job(self, label, len(pending), finished)) as watch:
            for batch in dataset.iter_batches(batch_size=1):
                rows, finished = int(batch["rows"][0]), finished + 1
                done += rows
                watch.beat()
                if progress is not None:
                    progress(rows)
        return done
