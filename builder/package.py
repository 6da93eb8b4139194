"""`build-release`: data files, then the card, plot and manifest that describe them."""
from __future__ import annotations

import json
from pathlib import Path

from builder.agreement import agreement_markdown
from builder.card import plot_levels, render_card
from builder.lineage import release_profile
from builder.release import ReleaseSummary, build_release, file_manifest, write_json
from generation import __version__
from generation.profiles import Profile, load_profile
from generation.prompts import get_prompt

MANIFEST = "manifest.json"


def differences(profile: Profile) -> str:
    """Every knob where this release's profile differs from the paper's, then what always differs."""
    paper = load_profile("paper").model_dump()
    ours = profile.model_dump()
    lines = []
    for section in ("bm25", "rerank", "pool", "judge"):
        for key, value in ours[section].items():
            if paper[section].get(key) != value:
                lines.append(f"- `{section}.{key}`: {value!r} here, {paper[section].get(key)!r} in the `paper` profile.")
    lines += [
        "- The paper reports 13 \"Other\" outputs; here an output whose first digit is above 5 also counts as unparsed, "
        "so every stored level is on the 0-5 scale.",
        "- Documents are identified by ClueWeb22-ID and URL-hash; the paper does not say which key it used.",
    ]
    return "\n".join(lines)


def package_release(judgments: list[Path], questions: list[Path], out: Path, profile_name: str | Path | Profile | None,
                    repo: str = "ORG/researchy-subq-judgments", rows_per_file: int | None = None,
                    progress=None, agreement: Path | None = None) -> tuple[ReleaseSummary, Path]:
    profile, judges = release_profile(judgments, profile_name)
    kwargs = {"rows_per_file": rows_per_file} if rows_per_file else {}
    summary = build_release(judgments, questions, out, profile, progress=progress, **kwargs)
    judge = "; ".join(judges) or profile.judge.model
    prompt = get_prompt(profile.judge.prompt)
    splits = list(summary.stats)
    reranker = profile.rerank.model + (" (stand-in: MiniLM bi-encoder cosine)" if profile.rerank.backend == "bi-encoder"
                                       else f" ({profile.rerank.backend})")
    context = {
        "repo": repo, "profile": profile, "profile_hash": profile.config_hash(), "code_version": __version__,
        "judge": judge, "stand_in": any("stand-in" in j for j in judges) or profile.judge.backend == "bi-encoder",
        "reranker": reranker, "prompt": {"id": prompt.id, "source": prompt.source, "sha256": prompt.sha256,
                                         "text": prompt.render("{question}", "{context}")},
        "differences": differences(profile),
        "agreement": agreement_markdown(json.loads(Path(agreement).read_text())) if agreement else None,
    }
    plot_levels(out, summary.stats)
    card = render_card(out, summary.rows, summary.stats, splits, context)
    manifest = {
        "repo": repo, "code_version": __version__, "profile": profile.model_dump(), "profile_hash": profile.config_hash(),
        "models": {"reranker": reranker, "judge": judge}, "prompt": {"id": prompt.id, "sha256": prompt.sha256},
        "rows": summary.rows, "stats": summary.stats, "splits": splits, "files": file_manifest(out),
    }
    write_json(Path(out) / MANIFEST, manifest)
    return summary, card
