"""The sections of a profile (generation/profiles/profile.py `Profile`): one strict pydantic model per section, each key
with its type, bounds, default and meaning (docs/reference/profiles.md is made from them), and the judge section's
own checks. Strict: no coercion, no infinities or NaN, no unknown keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from generation.profiles.backend_registry import JUDGE_BACKENDS, RERANK_BACKENDS

# The backend names come from the registry at run time (one entry in generation/profiles/backend_registry.py adds one),
# which a static checker cannot read: to mypy they are strings, to pydantic the Literal that refuses any other name.
if TYPE_CHECKING:
    RerankBackend = str
    JudgeBackend = str
else:
    RerankBackend = Literal[tuple(RERANK_BACKENDS)]
    JudgeBackend = Literal[(*JUDGE_BACKENDS, "ray")]  # "ray": Ray actors (generation/executors/ray.py)


class Strict(BaseModel):
    # strict: YAML `true` is not a number and "100" is not an int (pydantic's lax mode coerces both)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class BM25(Strict):
    """BM25 over the Lucene index (`retrieve`; the stemmer also builds the index)."""

    k1: float = Field(gt=0, description="BM25 term-frequency saturation (Pyserini's default 0.9)")
    b: float = Field(ge=0, le=1, description="BM25 document-length normalisation (Pyserini's default 0.4)")
    depth: int = Field(ge=1, description="hits retrieved per query")
    query: Literal["question", "subquestions"] = Field(description="what the BM25 query is built from")
    stemmer: Literal["porter", "krovetz", "none"] = Field(
        default="porter",
        description="stemmer of the index and the queries (Anserini's -stemmer); `index` builds with it",
    )
    threads: int = Field(default=1, ge=1, description="search threads of `retrieve` (its --threads overrides this)")


ATTENTION = Literal["sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3"]


class TransformersSettings(Strict):
    """How the transformers backend batches and places the model (docs/performance.md, "The judge and the reranker on GPUs");
    vLLM ignores them, and so does the config hash. The backend takes its section whole (generation/backends/hf.py)
    and names a key in its notices as SECTION.KEY."""

    SECTION: ClassVar[str]  # the section's key in a profile: judge or rerank

    max_batch_tokens: Annotated[int, Field(ge=1)] | Literal["auto"] | None = Field(
        default=None,
        description="tokens per batch (rows x longest row; packed: their sum), batch_size pairs capping "
        "it; auto: from the device's free memory after loading; null: batch_size alone",
    )
    gpu_memory_utilization: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="share of each GPU's memory the weights, placed by device_map, and the auto batch budget may take",
    )
    attention: ATTENTION | None = Field(
        default=None, description="transformers' attn_implementation (default: its own)"
    )
    packed: bool = Field(
        default=False,
        description="sequences laid end to end without padding, no shared-prefix "
        "reuse; on a GPU with variable-length attention (flex/flash)",
    )
    compile: bool | Literal["suffix"] = Field(
        default=False,
        description="true: torch.compile the model's forward, every forward (dynamic shapes; the first "
        "batch pays the compile), for torchao fp8, whose activation "
        "quantization runs as separate kernels without it; suffix (the judge's): a document-first judge's suffix "
        "forwards alone, its prefix passes eager (docs/performance.md); speed-ups: only "
        "the measured ones (docs/benchmarks-judge.md)",
    )


class Rerank(TransformersSettings):
    """The reranker over the BM25 run (`rerank`)."""

    SECTION: ClassVar[str] = "rerank"

    backend: RerankBackend = Field(
        description="what scores the documents: transformers (CPU or GPU), vllm (GPU), or the MiniLM bi-encoder "
        "stand-in"
    )
    model: str = Field(
        min_length=1,
        description="a Hub name already in the Hugging Face cache (nothing downloads at run time) or a local folder",
    )
    instruction: str = Field(min_length=1, description="the reranker's instruction (Qwen3-Reranker's <Instruct>)")
    query_builder: Literal["join-subquestions", "crux-code-list"] = Field(
        description="join-subquestions: the sub-questions joined by query_separator (the paper's Figure 1); "
        'crux-code-list: "[" + ", ".join([question] + subquestions) + "]" (the authors\' code)'
    )
    query_separator: str = Field(default=" ", description="what joins the sub-questions (join-subquestions)")
    input_format: Literal["model-card", "crux-code"] = Field(
        default="model-card",
        description="the reranker input as the model card builds it, or as the authors' "
        "crux-researchy/rerank-candidates.py does (generation/judging/reranker_input.py)",
    )
    max_subquestions: int | None = Field(default=None, ge=1, description="crux-code keeps the first 10")
    depth: int = Field(ge=1, description="BM25 hits reranked per question")
    max_doc_words: int | None = Field(default=None, ge=1, description="cut the document to its first N words")
    max_length: int = Field(ge=64, description="max tokens of the whole reranker input")
    batch_size: int = Field(default=16, ge=1, description="documents scored per engine call")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="the weights' dtype; auto: the checkpoint's own (float32 on a CPU)"
    )

    @model_validator(mode="after")
    def _no_suffix_forwards(self) -> Rerank:
        if self.compile == "suffix":
            raise ValueError(
                "compile: suffix compiles a document-first judge's suffix forwards; the reranker runs none (a "
                "document is not a prefix its queries share): set compile: true (every forward) or false"
            )
        return self


class Pool(Strict):
    """Which documents each question's sub-questions are judged against (`pool`)."""

    rule: Literal["union", "sequential"] = Field(
        description="union: top-k BM25 + top-k reranked + clicked; sequential: fill in that order, no repeats"
    )
    bm25_top: int = Field(ge=0, description="BM25 hits taken per question")
    rerank_top: int = Field(ge=0, description="reranked hits taken per question")
    include_clicked: bool = Field(
        default=True, description="add the question's clicked documents that are in the corpus"
    )


# vllm.LLM arguments the judge section's own keys give (generation/backends/vllm_adapter.py judge_engine_args)
ENGINE_ARGS_SET_BY_KEYS = {
    "model": "judge.model",
    "tensor_parallel_size": "judge.tensor_parallel_size",
    "dtype": "judge.dtype",
    "max_model_len": "judge.max_model_len",
    "enable_prefix_caching": "judge.enable_prefix_caching",
    "quantization": "judge.quantization",
    "seed": "the kit (0, for reproducible runs)",
}


class OpenAIServer(Strict):
    """The judge's `openai` backend: any OpenAI-compatible server (`vllm serve`, SGLang, TGI, a hosted API)."""

    # How to reach the server, not what it is asked: outside the config hash, so a shard resumes after the server
    # moves to another node or the concurrency changes. request_shape, served_model and the logprobs keys are in it.
    NOT_HASHED: ClassVar[tuple[str, ...]] = (
        "endpoint",
        "api_key_env",
        "concurrency",
        "request_timeout_s",
        "max_retries",
        "retry_backoff_s",
        "max_retry_after_s",
    )
    endpoint: str = Field(
        pattern=r"^https?://[^/@\s]+(/\S*)?$",
        description=(
            "the API base URL, e.g. http://gpu-node:8000/v1; requests go to {endpoint}/completions or "
            "{endpoint}/chat/completions; no credentials in it (api_key_env)"
        ),
    )
    request_shape: Literal["completions", "chat"] = Field(
        description="completions: the prompt as the kit's own token ids (its chat template, token cut and BOS); "
        "chat: the rendered messages, the server's chat template applies"
    )
    served_model: str | None = Field(
        default=None,
        min_length=1,
        description="the model name the server answers to "
        "(vLLM: --served-model-name, default its --model); default: judge.model",
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="name of the environment variable holding the API key (sent as a "
        "Bearer token, never printed or written); null: no key",
    )
    digit_logprobs: Literal["logprob_token_ids", "top_logprobs"] = Field(
        default="logprob_token_ids",
        description="distribution mode: vLLM's logprob_token_ids (each digit's exact "
        "log-probability, whatever its rank), or the standard top_logprobs (a digit outside the top-k counts as 0)",
    )
    top_logprobs: int = Field(default=20, ge=1, description="distribution mode with top_logprobs: the k asked for")
    concurrency: int = Field(default=64, ge=1, description="requests in flight at once")
    request_timeout_s: float = Field(default=300.0, gt=0, description="one request's time limit, per attempt")
    max_retries: int = Field(
        default=5,
        ge=0,
        description="retries of a request after 429, 5xx, a timeout or a connection error, before the pair fails",
    )
    retry_backoff_s: float = Field(
        default=1.0,
        gt=0,
        description="first wait before a retry, doubled each time "
        "(at most 60 s); a server's Retry-After header takes its place",
    )
    max_retry_after_s: float = Field(
        default=120.0,
        gt=0,
        description="the longest wait a server's Retry-After "
        "header gets (a proxy asking for an hour would stall every request in flight)",
    )


# The prompts whose document comes first (generation/judging/prompts.py `Prompt.document_first`, which a test holds
# this to): named here because the profile's sections sit below the judging package and do not import it.
DOCUMENT_FIRST_PROMPTS = ("crux-paper-document-first",)


class JudgeConfig(TransformersSettings):
    """The judge that grades every (sub-question, candidate) pair (`judge`)."""

    SECTION: ClassVar[str] = "judge"

    backend: JudgeBackend = Field(
        description="what grades the pairs: vllm (GPU), transformers (CPU or GPU), ray (Ray actors, each running "
        "ray_backend), openai (any OpenAI-compatible server, the `openai` section), or the MiniLM bi-encoder stand-in"
    )
    ray_backend: Literal["vllm", "transformers"] = Field(default="vllm", description="what each Ray actor runs")
    ray_workers: int = Field(default=1, ge=1, description="Ray actors (one per GPU, or per tensor-parallel group)")
    device: str = Field(
        default="auto",
        description="transformers: cpu, cuda or cuda:N; auto: a GPU when there is "
        "one (with backend ray, cpu asks Ray for no GPU)",
    )
    model: str = Field(
        min_length=1,
        description="a Hub name already in the Hugging Face cache (`hf download NAME`: "
        "nothing downloads at run time) or a local folder",
    )
    prompt: Literal["crux-paper", "crux-paper-document-first", "crux-code", "umbrela", "r3a"] = Field(
        description="crux-paper: the paper's Figure 2; crux-paper-document-first: Figure 2 with the context before the "
        "question (a document's prefix serves all its sub-questions); crux-code: the authors' gen_ratings.py "
        "template; umbrela; r3a (generation/judging/prompts.py)"
    )
    mode: Literal["generate", "distribution"] = Field(
        description="generate: greedy text parsed by the authors' rule; distribution: one step, probabilities over "
        "the scale's digit tokens"
    )
    chat_template: bool = Field(description="render the prompt through the judge tokenizer's chat template")
    context_words: int = Field(ge=1, description="the document is cut to its first N whitespace words")
    max_new_tokens: int | None = Field(default=None, ge=1, description="default: the prompt's token budget")
    auxiliary_documents: int = Field(default=3, ge=1, description="r3a: top-ranked candidates shown in round one")
    temperature: float = Field(
        ge=0,
        description="recorded in the manifest only: every backend decodes greedily "
        "(temperature 0), as the authors' code did",
    )
    max_model_len: int = Field(ge=256, description="tokens of prompt + answer; a longer context is cut by tokens")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="bfloat16", description="the weights' dtype"
    )
    quantization: Literal["fp8"] | None = Field(
        default=None, description="fp8 weights and activations: vLLM's `quantization`, torchao's float8 on transformers"
    )
    # Outside the dump (and so the config hash) at its default, so profiles written before it hash as before; a
    # per-row profile hashes apart, as its labels differ.
    fp8_granularity: Literal["per-tensor", "per-row"] = Field(
        default="per-tensor",
        exclude_if=lambda value: value == "per-tensor",
        description="transformers backend with quantization fp8: torchao's activation and weight scales, one per "
        "tensor (the default: vLLM's online fp8 scales so, and it is the measured one) or one per row (a token's "
        "scale from its own row, so its label does not depend on its batch mates: docs/pilot.md)",
    )
    batch_invariant: bool = Field(
        default=False,
        exclude_if=lambda value: not value,
        description="vllm backend: vLLM's batch-invariant kernels (VLLM_BATCH_INVARIANT=1; beta, NVIDIA compute "
        "capability >= 8.0 in vLLM 0.32), so a pair's output does not depend on its batch",
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="GPUs one vLLM engine spans")
    enable_prefix_caching: bool = Field(
        default=True, description="vLLM reuses the KV cache of a prompt prefix shared by pairs of one sub-question"
    )
    batch_size: int = Field(default=64, ge=1, description="pairs per engine call")
    chunk_size: int = Field(default=4096, ge=1, description="pairs per checkpointed chunk")
    cut_points: list[float] | None = Field(
        default=None, description="bi-encoder stand-in: cosine thresholds for levels 1..5, increasing"
    )
    openai: OpenAIServer | None = Field(default=None, description="backend openai: the server and how to call it")

    @model_serializer(mode="wrap")
    def _without_unset_server(self, handler):
        """A profile without a server dumps (and hashes) as before the `openai` section existed."""
        data = handler(self)
        if isinstance(data, dict) and data.get("openai") is None:
            data.pop("openai", None)
        return data

    engine_args: dict[str, Any] = Field(
        default_factory=dict,
        exclude_if=lambda args: not args,  # empty: not in the manifest's profile at all
        description="vllm backend: more `vllm.LLM(...)` arguments, passed as given, e.g. {gpu_memory_utilization: "
        "0.9, max_num_seqs: 256, enforce_eager: true}; not those other keys set (model, dtype, "
        "tensor_parallel_size, max_model_len, enable_prefix_caching, quantization, seed); left out of "
        "the config hash, as the transformers settings are",
    )

    @model_validator(mode="after")
    def _engine_args_do_not_repeat_keys(self) -> JudgeConfig:
        repeated = sorted(set(self.engine_args) & set(ENGINE_ARGS_SET_BY_KEYS))
        if repeated:
            raise ValueError(
                "engine_args: " + "; ".join(f"{key} is set by {ENGINE_ARGS_SET_BY_KEYS[key]}" for key in repeated)
            )
        return self

    @model_validator(mode="after")
    def _batch_settings_fit_the_backend(self) -> JudgeConfig:
        engine = self.ray_backend if self.backend == "ray" else self.backend
        if self.fp8_granularity == "per-row" and (self.quantization != "fp8" or engine != "transformers"):
            raise ValueError(
                "fp8_granularity: per-row is torchao's, on the transformers backend with quantization: fp8 (this "
                f"judge: backend {engine}, quantization {self.quantization}); vLLM scales fp8 activations per "
                "tensor: set batch_invariant: true there instead"
            )
        if self.batch_invariant and engine != "vllm":
            hint = (
                "start the server with VLLM_BATCH_INVARIANT=1 (vllm serve)"
                if engine == "openai"
                else "on transformers, fp8_granularity: per-row (fp8), or no quantization"
            )
            raise ValueError(f"batch_invariant: vLLM's mode, for backend vllm (this judge: {engine}); {hint}")
        return self

    @model_validator(mode="after")
    def _suffix_forwards_to_compile(self) -> JudgeConfig:
        """`compile: suffix` where the judge runs suffix forwards in the slot layout (compiled_suffixes.py)."""
        if self.compile != "suffix":
            return self
        engine = self.ray_backend if self.backend == "ray" else self.backend
        if engine != "transformers":
            problem = f"this judge's backend is {engine}"
        elif self.prompt not in DOCUMENT_FIRST_PROMPTS:
            problem = f"prompt {self.prompt} puts no document first, so no prompts share it as a prefix"
        elif self.packed:
            problem = "packed: true runs whole prompts, no suffix forwards"
        elif self.attention not in (None, "sdpa", "eager"):
            problem = f"attention {self.attention} takes no 4D mask, which the slot layout needs (sdpa or eager)"
        else:
            return self
        raise ValueError(
            f"compile: suffix compiles a document-first judge's suffix forwards (prompt {' or '.join(DOCUMENT_FIRST_PROMPTS)}, "
            f"backend transformers): {problem}. Set compile: true (every forward) or false"
        )

    @model_validator(mode="after")
    def _cut_points_fit(self) -> JudgeConfig:
        if self.backend == "openai" and self.openai is None:
            raise ValueError("backend openai needs the openai section (endpoint, request_shape, ...)")
        if self.backend == "bi-encoder":
            if not self.cut_points:
                raise ValueError("backend bi-encoder needs cut_points")
        if self.cut_points is not None:
            if any(b <= a for a, b in zip(self.cut_points, self.cut_points[1:])):
                raise ValueError("cut_points must be strictly increasing")
            if len(self.cut_points) != 5:
                raise ValueError(f"cut_points: one threshold per level 1..5, so 5 values, got {len(self.cut_points)}")
            if any(not -1 <= c <= 1 for c in self.cut_points):
                raise ValueError("cut_points are cosines: each in [-1, 1]")
        return self
