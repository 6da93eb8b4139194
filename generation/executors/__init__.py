"""Executors: run a stage's shards and chunks in this process (local), on Ray, or as a Slurm array."""
