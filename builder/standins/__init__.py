"""Stand-ins for what the kit meets in production, so tests, benchmarks and scripts/hostile.py run without it:
tiny random-weight models (models.py), an OpenAI-compatible server on loopback and a batch runner over it
(openai_server.py), a real `vllm serve` on loopback (vllm_server.py), a synthetic ClueWeb22 txt tree and release
stub (clueweb22_texts.py), and releases corrupted then re-sealed as a careless hand fix would (release_faults.py, release_edits.py).
Beside them, the benchmarks' support: synthetic judgment sets at any scale with the paper's level mix
(synthetic.py) and the GPU benchmark's measurements (gpu_bench.py, for scripts/bench_gpu.py)."""
