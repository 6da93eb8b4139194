"""Judging a shard's chunks with Ray Data: one actor per worker holds a backend; each chunk is built,
judged and written atomically by the actor that takes it, so a lost worker costs only its chunk."""
from __future__ import annotations

from pathlib import Path


class ChunkWorker:
    """A Ray Data actor: rebuilds the shard's (deterministic) pair plan once, then judges chunks."""

    def __init__(self, profile_json: str, subquestions: str, candidates: str, index: str, out: str,
                 shard_index: int, shard_count: int):
        from generation.stages.judge import ShardJob, make_judge
        from generation.profiles import Profile
        from generation.shards import Shard

        profile = Profile.model_validate_json(profile_json)
        self.job = ShardJob(profile, Path(subquestions), Path(candidates), Path(index), Path(out),
                            Shard(shard_index, shard_count))
        self.judge = make_judge(profile.judge, backend=profile.judge.ray_backend)

    def __call__(self, batch: dict) -> dict:
        import numpy as np

        done = [self.job.run_chunk(int(k), self.judge) for k in batch["chunk"]]
        return {"chunk": np.asarray(batch["chunk"]), "pairs": np.asarray(done)}


def gpus_per_worker(config) -> float:
    if config.ray_backend == "vllm":
        return float(config.tensor_parallel_size)
    return 0.0 if config.device == "cpu" else 1.0


def run_chunks_on_ray(job, pending: list[int], subquestions: Path, candidates: Path, index: Path, out: Path,
                      progress=None) -> int:
    import ray

    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    config = job.config
    dataset = ray.data.from_items([{"chunk": k} for k in pending]).map_batches(
        ChunkWorker, batch_size=1, concurrency=config.ray_workers, num_gpus=gpus_per_worker(config),
        fn_constructor_kwargs={"profile_json": job.profile.model_dump_json(), "subquestions": str(subquestions),
                               "candidates": str(candidates), "index": str(index), "out": str(out),
                               "shard_index": job.shard.index, "shard_count": job.shard.count})
    judged = 0
    for batch in dataset.iter_batches(batch_size=1):
        done = int(batch["pairs"][0])
        judged += done
        if progress is not None:
            progress(done)
    return judged
