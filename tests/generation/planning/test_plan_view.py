"""`plan` a person can read: by default at most 100 columns at any terminal width and when piped, the profile named
and its own prompt's paper-scale rows first, each with what priced it, one sentence saying which row to budget and
why, and the notes after the tables; `--full` keeps every column, `--json` the numbers."""

import io
import json

import pytest

from generation.progress import FullWidthConsole
from tests.helpers import cli


def without_progress(text: str) -> str:
    """CliRunner's output holds stderr too: the progress line goes."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("measuring prompts"))


def plan_args(small_pipeline, profile="paper"):
    return [
        "plan", "--profile", profile, "--subquestions", small_pipeline["questions"], "--candidates",
        small_pipeline["candidates"], "--index", small_pipeline["index"], "--sample", 30,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def printed(small_pipeline):
    """stdout of the default view (piped: CliRunner is not a terminal) and the plan as JSON, per profile."""
    out = {}
    for profile in ("paper", "paper-document-first"):
        code, text = cli(*plan_args(small_pipeline, profile))
        assert code == 0, text
        code, document = cli(*plan_args(small_pipeline, profile), "--json", "-")
        assert code == 0, document
        out[profile] = without_progress(text), json.loads(document[document.index("{") :])
    return out


@pytest.mark.parametrize("width", [None, 40, 80, 120, 300])
def test_the_default_view_fits_100_columns_at_any_terminal_width_and_piped(small_pipeline, monkeypatch, width):
    """None: piped (unbounded width: a wide table would run to ~300 columns); else a terminal of that many columns."""
    import builder.cli.support as support

    if width is not None:
        terminal = FullWidthConsole(file=io.StringIO(), force_terminal=True, width=width)
        monkeypatch.setattr(support, "results", terminal)
    code, text = cli(*plan_args(small_pipeline))
    assert code == 0, text
    shown = text if width is None else terminal.file.getvalue()
    lines = without_progress(shown).splitlines()
    assert len(lines) > 30 and max(map(len, lines)) <= 100, max(lines, key=len)
    assert "…" not in shown, "no figure cut to fit"


def test_each_profile_is_named_and_its_own_rows_come_first(printed):
    for profile, own, other in (
        ("paper", "crux-paper", "crux-paper-document-first"),
        ("paper-document-first", "crux-paper-document-first", "crux-paper"),
    ):
        text, planned = printed[profile]
        lines = text.splitlines()
        assert lines[0].startswith(f"plan for profile {profile}: the Llama-3.3-70B judge, prompt {own},")
        first = lines.index(f"{own}: the profile's own prompt ({profile})")
        second = lines.index(f"{other}: for comparison (not this profile's prompt)")
        assert first < second
        header = lines[first + 1].split()
        assert header[:2] == ["row", "precision"] and "priced from" in lines[first + 1]
        first_row = lines[first + 3]
        assert first_row.startswith("paper, assumed") and first_row.split()[2] == planned["profile"]["precision"]
        budgeted = planned["budget"]["row"]
        assert (budgeted["label"], budgeted["prompt"]) == ("paper, assumed", own)
        assert f"{budgeted['hours']:,.1f}" in first_row
    assert printed["paper"][0] != printed["paper-document-first"][0]


def test_every_row_says_what_priced_it_device_and_date(printed):
    text, planned = printed["paper-document-first"]
    for row in planned["rows"]:
        assert row["origin"].startswith(("measured: whole model H100 ", "floor: whole model H100 ", "share H100 ",
                                         "shares H100 ")), row  # fmt: skip
        assert "2026-11-2" in row["origin"], row
    table = text[text.index("row  ") : text.index("\n[1] ")]
    assert table.count("floor: whole model H100 2026-11-27") >= 4
    assert "shares H100 2026-11-23/26" in table, "the variant's prefill share and its suffix share, both dated"
    keyed = {line.split(" ", 1)[0] for line in text.splitlines() if line.startswith("[")}
    used = {key for line in table.splitlines() for key in ("[1]", "[2]", "[3]", "[4]", "[5]") if key in line}
    assert used and used <= keyed, "each key in the table is explained after it"


def test_one_sentence_says_which_row_to_budget_and_why(printed):
    """Three bills for one prompt and precision ("these pairs", "paper, measured", "paper, assumed"): the sentence
    names the one to budget and why: here the judge's tokenizer stood in and no sampled document reaches the cut."""
    text, planned = printed["paper-document-first"]
    sentence = " ".join(text[text.index("Budget ") :].split("\n\n")[0].split())
    row = planned["budget"]["row"]
    assert sentence == " ".join(planned["budget"]["line"].split())
    assert sentence.startswith(f"Budget {row['hours']:,.1f} GPU-hours for the paper's 24,316,320 pairs")
    assert "row 'paper, assumed', crux-paper-document-first, bf16 (the profile's precision), because" in sentence
    assert "the judge's tokenizer stood in" in sentence and "reach the 2048-word cut" in sentence
    these = next(r for r in planned["rows"] if (r["label"], r["prompt"], r["precision"]) == (
        "these pairs", "crux-paper-document-first", "bf16"))  # fmt: skip
    assert f"Row 'these pairs' ({these['hours']:,.1f}) prices the {these['items']:,} pairs at hand" in sentence


def test_the_notes_come_after_the_tables_wrapped(printed):
    text, _ = printed["paper"]
    lines = text.splitlines()
    last_table_row = max(i for i, line in enumerate(lines) if "whole model H100" in line or "share H100" in line)
    first_note = next(i for i, line in enumerate(lines) if line.startswith("[1] "))
    assert first_note > last_table_row
    assert any(line.startswith("sbatch time limits from this plan") for line in lines[first_note:])
    assert lines[-1].startswith("Every row, column and note: add --full.")


def test_full_keeps_every_column_and_puts_its_notes_after_the_table(small_pipeline):
    code, text = cli(*plan_args(small_pipeline), "--full")
    assert code == 0, text
    lines = without_progress(text).splitlines()
    header = next(i for i, line in enumerate(lines) if "prefill GPU-h" in line and "GPUs a copy" in line)
    assert lines[0].startswith("plan for profile paper: ") and any(line.startswith("Budget ") for line in lines[:8])
    assert next(i for i, line in enumerate(lines) if line.startswith("Row 'these pairs' (crux-paper)")) > header
    assert max(map(len, lines[header + 2 :])) > 200, "the full table is wide"
