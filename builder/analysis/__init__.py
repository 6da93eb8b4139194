"""Analysis over judgments and releases: label agreement, retrieval complexity, evaluation, simulation; and the
GPU benchmark's measurements (gpu_bench.py)."""
