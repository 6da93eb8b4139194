"""Whole-model measurements in the plan: no paper-scale row is priced below what the whole judge was measured to do.

A calibration's `whole_model` entries (generation/judging/calibration.py) are pairs/s of one prompt through the kit on
the whole model, in one setting (precision, fp8 granularity, backend, device) and at one batch composition:
`rows_per_forward`, the rows of its long forwards. The composition a row of the plan runs at is what its backend
forms (`composition`):
- the paper prompt: the prompts a batch holds, as the backend would cut them (`Execution.decode_batch`);
- a document-first prompt: the documents whose prefixes share one prefix pass, as the transformers backend cuts a
  batch of them to its token budget (generation/backends/document_batches.py, the function the backend calls).

Which figure, by setting: the figures of the row's own setting. A setting nobody measured is floored by the nearest
one that was measured (`BORROWED`): per-row fp8 by per-tensor, vLLM by transformers, another GPU by the measured one,
bf16 by fp8 (fp8 ran 1.06-1.26x bf16's speed on the 16-layer shape). Nothing measured says the unmeasured setting is
faster, so the measured figure is its floor until a figure of its own says otherwise.

Which figure, by composition: the figure of the row's composition prices it; without one, the figure measured at the
most rows not above it (a speed-up from larger batches is not assumed before it is measured); without that, the
fewest rows measured, said to be possibly optimistic. A figure's seconds a pair scale with the row's FLOPs a pair over
the figure's own, and at the paper's scale never below the figure itself: the paper's documents are the
measurement's (2,048 words), so a row that projects them cheaper is the projection's error, not a saving. A figure of
the row's own setting and composition is the measurement of what runs, and prices the row; any other only floors the
component price (prefill at the calibrated share, suffixes at theirs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from generation.judging.calibration import same_device, short_device
from generation.planning.plan import PAPER_PAIRS

# The settings a figure may floor when the row's own was not measured, and why each one is a floor.
BORROWED = {
    "fp8_granularity": "nothing measured says it is faster",
    "backend": "nothing measured says it is faster",
    "device": "nothing measured says it is faster",
    "precision": "fp8 ran 1.06-1.26x bf16's speed on the 16-layer shape (CHANGELOG.md, 2026-11-23 and 2026-11-27)",
}
FLOORS_FOR = {"bf16": ("bf16", "fp8"), "fp8": ("fp8",)}  # a row's precision -> the precisions whose figures floor it


@dataclass(frozen=True)
class Setting:
    """What a row of the plan runs as, in the terms a whole-model figure is keyed by (beside prompt and composition)."""

    precision: str
    fp8_granularity: str
    backend: str
    device: str  # the calibration's device name

    def differences(self, entry: dict) -> list[str]:
        """The keys of BORROWED in which `entry` was measured otherwise than this setting runs."""
        of_entry = entry_setting(entry)
        found = []
        if of_entry.precision != self.precision:
            found.append("precision")
        elif self.precision == "fp8" and of_entry.fp8_granularity != self.fp8_granularity:
            found.append("fp8_granularity")
        if of_entry.backend != self.backend:
            found.append("backend")
        if not same_device(of_entry.device, self.device):
            found.append("device")
        return found

    def named(self, key: str) -> str:
        return {"fp8_granularity": self.fp8_granularity, "device": short_device(self.device)}.get(key) or getattr(
            self, key
        )


def entry_setting(entry: dict) -> Setting:
    return Setting(
        entry["precision"],
        entry.get("fp8_granularity", "per-tensor"),
        entry.get("backend", "transformers"),
        entry["device"],
    )


@dataclass(frozen=True)
class Figure:
    """The whole-model figure a row is priced against, and one line saying which and why."""

    seconds_per_pair: float  # GPU-seconds a pair at the figure's own FLOPs a pair
    flops_per_pair: float
    line: str
    exact: bool  # the row's own setting at the composition the row runs at: it prices the row, above or below
    short: str  # for the compact view: "floor: whole model H100 2026-11-27" ("measured: ..." when it prices the row)

    def seconds(self, flops_per_pair: float, paper_scale: bool) -> float:
        ratio = flops_per_pair / self.flops_per_pair
        return self.seconds_per_pair * (max(ratio, 1.0) if paper_scale else ratio)


def composition(decode_batch: int, groups=None, max_pairs: int = 0, budget_tokens: int | None = None) -> int:
    """Rows of a row's long forwards: the paper prompt's prompts a batch (`decode_batch`), or, for a document-first
    prompt (`groups`: its prefix, suffix and pairs a document), the documents a prefix pass holds."""
    if groups is None:
        return max(decode_batch, 1)
    return documents_a_prefix_pass(
        round(groups.prefix_tokens), max(round(groups.suffix_tokens), 1), max(round(groups.pairs_per_group), 1),
        max_pairs, budget_tokens,
    )  # fmt: skip


@lru_cache(maxsize=64)
def documents_a_prefix_pass(prefix: int, suffix: int, members: int, max_pairs: int, budget: int | None) -> int:
    """The documents whose prefixes run in one forward when the transformers backend cuts batches of documents of
    `prefix` shared tokens and `members` pairs of `suffix` tokens each: its own cut (DocumentBatches.cut) on
    such documents, the mean over its batches but the last (a tail holds what is left, not what fits)."""
    from generation.backends.document_batches import DocumentBatches

    fits = max_pairs // members + 2 if max_pairs else 2
    if budget:
        fits = min(fits, budget // max(prefix, 1) + 2)
    documents = 3 * max(fits, 1) + 1
    shared = [0] * prefix
    sequences = [shared + [m + 1] * suffix for _ in range(documents) for m in range(members)]
    keys = [d for d in range(documents) for _ in range(members)]
    batches = DocumentBatches(sequences, keys).cut(range(len(sequences)), max_pairs or len(sequences), budget)
    first_seen: set[int] = set()
    passes = []
    for batch in batches:
        new = {keys[i] for i in batch} - first_seen
        first_seen |= new
        passes.append(len(new))
    full = passes[:-1] or passes
    return max(round(sum(full) / len(full)), 1)


def figure_for(calibration, prompt: str, setting: Setting, rows: int) -> Figure | None:
    """The whole-model figure for this prompt, setting and composition, by the rules above; None without one."""
    entries = [e for e in calibration.whole_model if e["prompt"] == prompt]
    own = [e for e in entries if not setting.differences(e)]
    borrowed = [] if own else [e for e in entries if e["precision"] in FLOORS_FOR.get(setting.precision, ())]
    if not own and not borrowed:
        return None
    if not own:  # the nearest measured setting: the fewest differences
        fewest = min(len(setting.differences(e)) for e in borrowed)
        borrowed = [e for e in borrowed if len(setting.differences(e)) == fewest]
    candidates = own or borrowed
    entry, why, exact = by_composition(candidates, rows)
    if not own:
        exact = False
        apart = setting.differences(entry)
        of_entry = entry_setting(entry)
        measured = ", ".join(
            f"{setting.named(k)} not measured: the {of_entry.named(k)} figure floors it" for k in apart
        )
        why = f"{measured} ({'; '.join(dict.fromkeys(BORROWED[k] for k in apart))}); {why}"
    paper_hours = PAPER_PAIRS / entry["pairs_per_s"] / 3600
    of_entry = entry_setting(entry)
    granularity = f" {of_entry.fp8_granularity}" if of_entry.precision == "fp8" else ""
    line = (
        f"{prompt}, {setting.precision}: not below the whole-model figure of {entry['measured']} on {entry['device']} "
        f"({entry['shape']}, {of_entry.backend}, {of_entry.precision}{granularity}, "
        f"{entry.get('code') or 'code not recorded'}): {entry['pairs_per_s']:g} pairs/s = {paper_hours:,.0f} "
        f"GPU-hours for the paper's pairs; {why}"
    )
    short = f"{'measured' if exact else 'floor'}: whole model {short_device(entry['device'])} {entry['measured']}"
    return Figure(1 / entry["pairs_per_s"], entry["flops_per_pair"], line, exact, short)


def by_composition(entries: list[dict], rows: int) -> tuple[dict, str, bool]:
    """(the entry, why it, whether it is of the row's own composition): exact, else the most rows below, else the
    fewest rows; among figures of one composition, the newest (ISO dates)."""
    exact = [e for e in entries if round(e["rows_per_forward"]) == rows]
    below = [e for e in entries if round(e["rows_per_forward"]) < rows]
    if exact:
        return (
            max(exact, key=lambda e: e["measured"]),
            f"measured at {rows:g} rows a forward, as this plan runs it",
            True,
        )
    if below:
        entry = max(below, key=lambda e: (e["rows_per_forward"], e["measured"]))
        why = (
            f"{rows:g} rows a forward not measured: priced at the {entry['rows_per_forward']:g}-row figure "
            "(no speed-up assumed before it is measured: scripts/bench_whole_model.py)"
        )
        return entry, why, False
    fewest = min(e["rows_per_forward"] for e in entries)
    entry = max((e for e in entries if e["rows_per_forward"] == fewest), key=lambda e: e["measured"])
    why = (
        f"measured at {entry['rows_per_forward']:g} rows a forward, more than this plan's {rows:g}: possibly optimistic"
    )
    return entry, why, False


def floored(prefill: float, cached: float, figure: Figure | None, flops: float, paper_scale: bool):
    """(prefill seconds a pair, cached prefill seconds a pair, whether the figure set them): a figure of the row's
    own setting and composition prices it; any other, only where it is above the component prices (the cached price
    keeps its ratio to the uncached one)."""
    if figure is None:
        return prefill, cached, False
    measured = figure.seconds(flops, paper_scale)
    if measured <= prefill and not figure.exact:
        return prefill, cached, False
    return measured, measured * (cached / prefill if prefill else 1.0), True
