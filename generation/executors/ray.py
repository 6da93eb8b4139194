"""The Ray executor: a shard's pending chunks as a Ray Data dataset mapped over actors. Each actor rebuilds the
shard's (deterministic) work from its recipe once, holds one worker (a judge on `backend`), and runs, writes and
commits whole chunks, so a lost worker costs only its chunk. Before any actor starts, the driver builds nothing
heavy but checks that the cluster has the GPUs the actors need, and refuses in one line when it has not."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from generation.executors.errors import ClusterError
from generation.executors.stall import StallWatch, describe_ray_job
from generation.storage.shards import Shard


class ChunkActor:
    """A Ray Data actor: the work of one shard, rebuilt from its recipe, and a worker to run its chunks."""

    def __init__(self, stage_class: type, arguments: dict, shard_index: int, shard_count: int, backend: str | None):
        from generation.profiles.profile import Profile
        from generation.storage.shards import Shard

        arguments = dict(arguments)
        profile = Profile.model_validate_json(arguments.pop("profile_json"))
        stage = stage_class(
            profile,
            Path(arguments.pop("out")),
            **{k: Path(v) if isinstance(v, str) else v for k, v in arguments.items()},
        )
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
        refusal = gpu_refusal(self.workers, self.gpus_per_worker, ray.nodes())
        if refusal:
            raise ClusterError(refusal)

    def run_chunks(self, work, pending: Sequence[int], progress=None) -> int:
        import ray

        work.preflight(self.backend)
        self.check_resources()
        stage_class, arguments, shard_index, shard_count = work.recipe()
        dataset = ray.data.from_items([{"chunk": k} for k in pending]).map_batches(
            ChunkActor,
            batch_size=1,
            concurrency=self.workers,
            num_gpus=self.gpus_per_worker,
            fn_constructor_kwargs={
                "stage_class": stage_class,
                "arguments": arguments,
                "shard_index": shard_index,
                "shard_count": shard_count,
                "backend": self.backend,
            },
        )
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


def gpu_refusal(workers: int, gpus_per_worker: float, nodes: list[dict]) -> str | None:
    """Why Ray cannot place the actors, or None. `nodes` as `ray.nodes()` gives them ({"Alive", "Resources"}): an
    actor's GPUs must all be on one node, so a cluster of 4 nodes x 2 GPUs cannot hold an actor asking for 4."""
    if gpus_per_worker <= 0:
        return None
    per_node = [n.get("Resources", {}).get("GPU", 0.0) for n in nodes if n.get("Alive", True)]
    have, largest = sum(per_node), max(per_node, default=0.0)
    advice = "start Ray on GPU nodes (`ray start --head --num-gpus N`), or set judge.device: cpu / fewer ray_workers"
    if gpus_per_worker > have:
        return (
            f"Ray: each of the {workers} actors needs {gpus_per_worker:g} GPUs and the cluster has {have:g}; {advice}"
        )
    if gpus_per_worker > largest:
        return (
            f"Ray: each of the {workers} actors needs {gpus_per_worker:g} GPUs on one node and the largest node "
            f"has {largest:g} (the cluster {have:g} in all); lower judge.tensor_parallel_size or use nodes with "
            f"{gpus_per_worker:g} GPUs"
        )
    return None
