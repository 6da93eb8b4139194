"""GPU-hours of judging and reranking, calibrated: prefill at the share of the device's peak a calibration file
measured (generation/judging/calibration.py; a flag can override it), generate mode's decode steps as
memory-bound, and the rerank stage beside the judge.

Per judged pair: prefill = prompt FLOPs (model_shapes.prompt_flops) / (peak x share). Generate mode then takes
`new_tokens - 1` decode steps (the first answer token comes from the prefill's last position); each step reads
every weight once for the whole batch and the pair's own KV cache, so a pair's step costs
(weight bytes / batch + KV bytes of its prompt) / bandwidth. Distribution mode is the prefill alone. The rerank
stage: questions x depth documents of `rerank_tokens` tokens, one forward each, at the reranker's share.
"""

from __future__ import annotations

from dataclasses import dataclass

from generation.judging.calibration import REFERENCE, Calibration, device_spec
from generation.model_shapes import LLAMA_33_70B, PUBLISHED, QWEN3_RERANKER_06B, Shape, prompt_flops
from generation.planning.document_first import (
    PAPER_QUESTIONS_ASSUMED,  # the rerank rows name it as an assumption
    Groups,
)
from generation.planning.execution import Execution, Refused, execution_for
from generation.planning.origins import component_origin, measured_on, rerank_origin
from generation.planning.plan import PAPER_PAIRS, Plan, Scenario
from generation.planning.prefix_cache import PrefixCache
from generation.planning.whole_model import Setting, composition, figure_for, floored

# The document-first prompt's suffixes (a sub-question's ~20 tokens against a cached document) run as short batches
# whose weight reads dominate: priced at the calibration's `suffix` share, else at this assumption.
SUFFIX_SHARE_ASSUMED = 0.10  # the H100 reference measured 10.4% (scripts/bench_document_first.py, 2026-11-26)
RERANK_TOKENS_ASSUMED = 2800  # the H100 calibration of 2026-11-23 measured the rerank path at ~2,800 tokens a document
NODE_GPUS = 4


@dataclass(frozen=True)
class Costing:
    calibration: Calibration
    backend: str  # the judge's backend: whose utilisation applies
    mode: str  # generate or distribution
    decode_batch: int  # pairs sharing one decode step's weight reads
    judge: Shape = PUBLISHED[LLAMA_33_70B]
    reranker: Shape = PUBLISHED[QWEN3_RERANKER_06B]
    override: float | None = None  # --utilisation: one share for every precision
    judge_config: object | None = None  # the profile's JudgeConfig: the backend's own placement and batches

    def execution(self, precision: str) -> Execution | Refused:
        """How the judge's backend would run at this precision on the calibration's device (without a profile's
        judge: `decode_batch` pairs on one GPU, as stated)."""
        if self.judge_config is None:
            return Execution(self.decode_batch, None, 1, 1, f"{precision}: decode batch {self.decode_batch} (given)")
        return execution_for(
            self.judge_config,
            self.backend,
            self.judge,
            precision,
            device_spec(self.calibration.device),
            self.calibration.device,
        )

    def share(self, backend: str, precision: str) -> tuple[float | None, str]:
        """The prefill share of peak for this backend and precision, and where it comes from."""
        if self.override is not None:
            return self.override, "--utilisation"
        measured = self.calibration.share(backend, precision)
        if measured is not None:
            return measured, f"{backend} {precision}, calibrated{measured_on(self.calibration, precision, measured)}"
        if backend == "vllm":
            stand_in = self.calibration.share("transformers", precision)
            if stand_in is not None:
                return stand_in, (
                    f"vLLM not measured: the transformers {precision} figure"
                    f"{measured_on(self.calibration, precision, stand_in)}"
                )
        return None, "not measured"

    def precisions(self) -> list[str]:
        return list(self.calibration.peak_flops)

    def setting(self, precision: str) -> Setting:
        """What the judge runs as at this precision, as whole-model figures are keyed."""
        granularity = getattr(self.judge_config, "fp8_granularity", "per-tensor")
        return Setting(precision, granularity, self.backend, self.calibration.device)

    def suffix_share(self, precision: str) -> tuple[float, str]:
        """The share of peak a document-first prompt's suffix batches reach, and where it comes from. Their time is
        the weights' reading, so fp8 (half the bytes against twice the peak) keeps bf16's share when unmeasured."""
        if self.override is not None:
            return self.override, "--utilisation"
        shares = self.calibration.utilisation.get("suffix", {})
        share = shares.get(precision, shares.get("bf16"))
        if share is None:
            return SUFFIX_SHARE_ASSUMED, f"suffixes at an ASSUMED {SUFFIX_SHARE_ASSUMED:.0%} of peak"
        borrowed = "" if precision in shares else f" (bf16's figure: {precision} not measured)"
        where = measured_on(self.calibration, "bf16", share, "suffix")
        return share, f"suffixes at {share:.1%}, calibrated{where}{borrowed}"


def prefill_seconds(shape: Shape, tokens: float, cached: float, peak: float, share: float) -> float:
    return prompt_flops(shape, tokens, cached) / (peak * share)


def decode_seconds(
    shape: Shape, precision: str, prompt_tokens: float, new_tokens: int, batch: int, bandwidth: float
) -> float:
    """Memory-bound decode steps of one pair: weights read once per step for the batch, plus its KV cache."""
    steps = max(new_tokens - 1, 0)
    kv = shape.kv_bytes_per_token(2) * (prompt_tokens + new_tokens / 2)
    return steps * (shape.weight_bytes(precision) / batch + kv) / bandwidth


@dataclass(frozen=True)
class CostRow:
    label: str
    items: int
    tokens: float
    precision: str
    share: float
    source: str
    pflops: float
    prefill_hours: float
    decode_hours: float
    cached_hours: float  # prefill with the shared prefix cached, plus decode
    decode_batch: int = 0  # pairs sharing a decode step, as the backend would batch them
    gpus: int = 1  # GPUs one model copy holds (a device_map spread: all of them, one working at a time)
    prompt: str = "crux-paper"
    suffix_source: str = ""  # a document-first prompt's rows: what its suffixes' share is
    whole_model: str = ""  # the whole-model figure that set the prefill's price (its line), where it did
    rows_per_forward: int = 0  # the composition the row runs at, which its whole-model figure is looked up by
    origin: str = ""  # in short, what set the price: "whole model, H100 2026-11-27", or the shares' device and dates

    @property
    def hours(self) -> float:
        return self.prefill_hours + self.decode_hours

    @property
    def node_rate(self) -> float:
        return self.items / (self.hours * 3600) * NODE_GPUS if self.hours else 0.0


def judge_rows(plan: Plan, costing: Costing) -> tuple[list[CostRow], list[str]]:
    cal, rows, notes = costing.calibration, [], []
    runs = {precision: costing.execution(precision) for precision in costing.precisions()}
    notes += [
        f"Judge as the {costing.backend} backend would run it: {run}"
        if isinstance(run, Refused)
        else f"Judge as the {costing.backend} backend would run it: {run.how}"
        for run in runs.values()
    ]
    cache = PrefixCache.of(costing.judge_config) if costing.backend == "vllm" else None
    for scenario in plan.scenarios():
        reuse = (1 - 1 / scenario.pairs_per_subquestion) if scenario.pairs_per_subquestion >= 1 else 0.0
        cached = reuse * scenario.shared_prefix_tokens
        if cache is not None and scenario.groups is not None:
            notes.append(cache.line(scenario.prompt, scenario.label, scenario.groups))
        for precision in costing.precisions():
            share, source = costing.share(costing.backend, precision)
            run = runs[precision]
            if isinstance(run, Refused):
                continue
            if share is None:
                notes.append(f"{scenario.label}, {precision}: no {costing.backend} utilisation measured; row left out")
                continue
            peak, tokens = cal.peak_flops[precision], scenario.prompt_tokens
            batch, span = run.decode_batch(tokens), run.hours_per_copy_gpu
            decode = 0.0
            if costing.mode == "generate":
                if cal.bandwidth is None:
                    notes.append(f"{scenario.label}: the calibration has no bandwidth; decode steps not costed")
                else:
                    decode = (
                        decode_seconds(costing.judge, precision, tokens, scenario.new_tokens, batch, cal.bandwidth)
                        * span
                    )
            suffix_source = ""
            if scenario.groups is None:
                prefill = prefill_seconds(costing.judge, tokens, 0.0, peak, share) * span
                cached_prefill = prefill_seconds(costing.judge, tokens, cached, peak, share) * span
            else:
                prefill, suffix_source = grouped_prefill_seconds(
                    scenario.groups, costing, precision, peak, share, cache
                )
                prefill, cached_prefill = prefill * span, prefill * span
            rows_now = composition(batch, scenario.groups, run.max_pairs, run.budget_tokens)
            figure = figure_for(cal, scenario.prompt, costing.setting(precision), rows_now)
            flops = flops_per_pair(scenario, costing.judge, cache)
            prefill, cached_prefill, by_figure = floored(
                prefill, cached_prefill, figure, flops, scenario.pairs == PAPER_PAIRS
            )
            if figure is not None and figure.line not in notes:
                notes.append(figure.line)
            rows.append(
                CostRow(
                    scenario.label,
                    scenario.pairs,
                    tokens,
                    precision,
                    share,
                    source,
                    scenario.pairs * flops / 1e15,
                    scenario.pairs * prefill / 3600,
                    scenario.pairs * decode / 3600,
                    scenario.pairs * (cached_prefill + decode) / 3600,
                    batch,
                    run.gpus,
                    scenario.prompt,
                    suffix_source,
                    figure.line if by_figure and figure is not None else "",
                    rows_now,
                    figure.short
                    if by_figure and figure is not None
                    else component_origin(
                        cal,
                        precision,
                        share,
                        costing.suffix_share(precision) if scenario.groups is not None else None,
                        costing.override is not None,
                    ),
                )
            )
    return rows, notes


def flops_per_pair(scenario: Scenario, shape: Shape, cache: PrefixCache | None = None) -> float:
    """The prompt's FLOPs per pair: the whole prompt; or, for a document-first prompt, 1/g of a group's prefix plus
    the pair's suffix (the transformers backend), or what vLLM's prefix cache leaves to compute (`cache`)."""
    if scenario.groups is None:
        return prompt_flops(shape, scenario.prompt_tokens)
    if cache is not None:
        return sum(cache.split_flops(shape, scenario.groups))
    return scenario.groups.flops(shape, 0)


def grouped_prefill_seconds(
    groups: Groups, costing: Costing, precision: str, peak: float, share: float, cache: PrefixCache | None = None
):
    """Per pair of a document-first prompt (its `groups`): 1/g of its group's prefix at the prefill's share, and its
    suffix at the suffixes' share; on vLLM (`cache`), its document's first requests at the prefill's share and the
    later ones, which find the document cached, at the suffixes' share."""
    prefix, suffix = groups.split_flops(costing.judge, 0) if cache is None else cache.split_flops(costing.judge, groups)
    suffix_share, source = costing.suffix_share(precision)
    return prefix / (peak * share) + suffix / (peak * suffix_share), source


def rerank_rows(plan: Plan, costing: Costing, depth: int, rerank_tokens: float) -> tuple[list[CostRow], list[str]]:
    cal, rows = costing.calibration, []
    shapes = [
        ("rerank, these questions", plan.questions),
        (f"rerank, paper (ASSUMED {PAPER_QUESTIONS_ASSUMED:,} questions)", PAPER_QUESTIONS_ASSUMED),
    ]
    notes = [
        f"Rerank rows: questions x depth {depth} documents of {rerank_tokens:,.0f} tokens (an assumption: "
        f"--rerank-tokens) on the {costing.reranker.name} shape, one forward each."
    ]
    for precision, share in costing.calibration.utilisation.get("rerank", {}).items():
        if costing.override is not None:
            share = costing.override
        for label, questions in shapes:
            docs = questions * depth
            seconds = prefill_seconds(costing.reranker, rerank_tokens, 0.0, cal.peak_flops[precision], share)
            source = (
                "--utilisation"
                if costing.override is not None
                else ("rerank, calibrated" + measured_on(cal, precision, share, "rerank"))
            )
            rows.append(
                CostRow(
                    label,
                    docs,
                    rerank_tokens,
                    precision,
                    share,
                    source,
                    docs * prompt_flops(costing.reranker, rerank_tokens) / 1e15,
                    docs * seconds / 3600,
                    0.0,
                    docs * seconds / 3600,
                    prompt="-",
                    origin=rerank_origin(cal, precision, share, costing.override is not None),
                )
            )
    if not rows:
        notes.append("Rerank rows left out: the calibration has no reranker figure.")
    return rows, notes


def model_shape(name: str) -> tuple[Shape, str | None]:
    """The shape of a profile's model: its config.json when on disk, else the published shape of that name, else
    Llama-3.3-70B's, with a note saying it stood in."""
    from generation.model_shapes import shape_from_config
    from generation.profiles.model_paths import ModelNotAvailable, resolve_model

    try:
        from transformers import AutoConfig

        return shape_from_config(AutoConfig.from_pretrained(str(resolve_model(name))), name), None
    except (ModelNotAvailable, OSError, ValueError, AttributeError):
        if name in PUBLISHED:
            return PUBLISHED[name], None
        stand_in = PUBLISHED[LLAMA_33_70B]
        return stand_in, f"{name}: no config on disk and no published shape here; {stand_in.name}'s shape stood in."


def costing_for(profile, calibration_path=None, utilisation: float | None = None) -> tuple[Costing, list[str]]:
    """The costing of a profile's judge and reranker, and notes on what stood in for what."""
    calibration = Calibration.load(calibration_path or REFERENCE)
    judge = profile.judge
    batch = judge.batch_size
    if isinstance(judge.max_batch_tokens, int):
        batch = max(1, min(batch, judge.max_batch_tokens // judge.max_model_len))
    (judge_shape, judge_note), (rerank_shape, rerank_note) = model_shape(judge.model), model_shape(profile.rerank.model)
    backend = judge.ray_backend if judge.backend == "ray" else judge.backend
    costing = Costing(
        calibration, backend, judge.mode, batch, judge_shape, rerank_shape, override=utilisation, judge_config=judge
    )
    return costing, [note for note in (judge_note, rerank_note) if note]
