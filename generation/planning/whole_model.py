"""Whole-model measurements in the plan: no paper-scale row is priced below what the whole judge was measured to do.

A calibration's `whole_model` entries (generation/judging/calibration.py) are pairs/s of one prompt at one precision
(and fp8 granularity) through the kit on the whole model, at one batch composition: `rows_per_forward`, the rows of
its long forwards. The composition a row of the plan runs at:
- a document-first prompt: the documents whose prefixes the backend runs in one forward, as many as the batch's
  token budget holds (generation/backends/document_batches.py), so the prompts a batch holds (`Execution.decode_batch`);
- the paper prompt: the prompts a batch holds, as the backend would cut them (`Execution.decode_batch`).

The figure of that composition prices it; without one, the figure measured at the most rows not above it (a speed-up
from larger batches is not assumed before it is measured); without that, the fewest rows measured, said to be
possibly optimistic. A figure's seconds a pair scale with the row's FLOPs a pair over the figure's own, and at the
paper's scale never below the figure itself: the paper's documents are the measurement's (2,048 words), so a row
that projects them cheaper is the projection's error, not a saving. A figure of the row's own composition is the
measurement of what runs, and prices the row; a figure of another composition only floors the component price
(prefill at the calibrated share, suffixes at theirs).
"""

from __future__ import annotations

from dataclasses import dataclass

from generation.planning.plan import PAPER_PAIRS


@dataclass(frozen=True)
class Figure:
    """The whole-model figure a row is priced against, and one line saying which and why."""

    seconds_per_pair: float  # GPU-seconds a pair at the figure's own FLOPs a pair
    flops_per_pair: float
    line: str
    exact: bool  # measured at the composition the row runs at: it prices the row, above or below the components

    def seconds(self, flops_per_pair: float, paper_scale: bool) -> float:
        ratio = flops_per_pair / self.flops_per_pair
        return self.seconds_per_pair * (max(ratio, 1.0) if paper_scale else ratio)


def composition(batch_rows: int) -> int:
    """Rows of a row's long forwards: the paper prompt's prompts a batch, or the document-first prompt's prefixes a
    prefix pass; both are cut to the same token budget. The 2026-11-27 variant figure ran one prefix a forward (the
    backend before several documents a forward): it floors the batched composition until that is measured."""
    return max(batch_rows, 1)


def figure_for(calibration, prompt: str, precision: str, granularity: str, rows: int) -> Figure | None:
    """The whole-model figure for this prompt, precision and composition, by the rule above; None without one."""
    entries = [
        e
        for e in calibration.whole_model
        if e["prompt"] == prompt
        and e["precision"] == precision
        and (precision != "fp8" or e.get("fp8_granularity", "per-tensor") == granularity)
    ]
    if not entries:
        return None
    exact = [e for e in entries if e["rows_per_forward"] == rows]
    below = sorted((e for e in entries if e["rows_per_forward"] < rows), key=lambda e: e["rows_per_forward"])
    if exact:
        newest = max(exact, key=lambda e: e["measured"])  # ISO dates: a newer figure replaces an older one
        entry, why = newest, f"measured at {rows:g} rows a forward, as this plan runs it"
    elif below:
        entry = below[-1]
        why = (
            f"{rows:g} rows a forward not measured: priced at the {entry['rows_per_forward']:g}-row figure "
            "(no speed-up assumed before it is measured: scripts/bench_whole_model.py)"
        )
    else:
        entry = min(entries, key=lambda e: e["rows_per_forward"])
        why = (
            f"measured at {entry['rows_per_forward']:g} rows a forward, more than this plan's {rows:g}: "
            "possibly optimistic"
        )
    paper_hours = PAPER_PAIRS / entry["pairs_per_s"] / 3600
    line = (
        f"{prompt}, {precision}: not below the whole-model figure of {entry['measured']} on {entry['device']} "
        f"({entry['shape']}, {entry.get('code') or 'code not recorded'}): {entry['pairs_per_s']:g} pairs/s = "
        f"{paper_hours:,.0f} GPU-hours for the paper's pairs; {why}"
    )
    return Figure(1 / entry["pairs_per_s"], entry["flops_per_pair"], line, bool(exact))


def floored(prefill: float, cached: float, figure: Figure | None, flops: float, paper_scale: bool):
    """(prefill seconds a pair, cached prefill seconds a pair, whether the figure set them): a figure of the row's
    own composition prices it; one of another, only where it is above the component prices (the cached price keeps
    its ratio to the uncached one)."""
    if figure is None:
        return prefill, cached, False
    measured = figure.seconds(flops, paper_scale)
    if measured <= prefill and not figure.exact:
        return prefill, cached, False
    return measured, measured * (cached / prefill if prefill else 1.0), True
