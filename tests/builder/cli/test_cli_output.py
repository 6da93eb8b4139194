"""What the commands print, and where: results, tables, YAML and JSON on stdout, progress, notices and
errors on stderr; tables whole when not on a terminal; `--json PATH` (`-` = stdout) for plan, simulate, evaluate and
agreement; help that reads as English; `profiles NAME` as the file itself and `profiles --reference` as docs/reference/profiles.md."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import typer.main
from typer.testing import CliRunner

from builder.cli.main import app
from generation.profiles.profile import PROFILE_DIR, load_profile

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


SYNTHETIC_RELEASE = dict(repo="ORG/researchy-subq-judgments", subquestions=120, judgments=2400, shards=1, seed=3)


@pytest.fixture(scope="module")
def run_file(release, tmp_path_factory):
    """A TREC run over the release's own documents: each question's candidates in docid order."""
    table = ds.dataset(release / "data" / "judgments", format="parquet").to_table(columns=["qid", "docid"])
    docs: dict[str, set] = {}
    for qid, docid in zip(table["qid"].to_pylist(), table["docid"].to_pylist()):
        docs.setdefault(qid, set()).add(docid)
    path = tmp_path_factory.mktemp("run") / "run.trec"
    path.write_text(
        "".join(f"{q} Q0 {d} {r} {100 - r} test\n" for q, ds_ in docs.items() for r, d in enumerate(sorted(ds_), 1))
    )
    return path


@pytest.mark.subprocess
def test_profile_printed_as_its_file_loads_as_a_profile(tmp_path):
    """`researchy-subq profiles paper > mine.yaml` gives the bundled file byte for byte: copying and editing it is
    how a profile is made. The line saying which file it is goes to stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "builder.cli.main", "profiles", "paper"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "40"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (PROFILE_DIR / "paper.yaml").read_text()
    assert "paper.yaml: a valid profile (config hash" in done.stderr
    mine = tmp_path / "mine.yaml"
    mine.write_text(done.stdout.replace("context_words: 2048", "context_words: 512"))
    assert load_profile(mine).judge.context_words == 512
    assert load_profile(mine).model_copy(update={"judge": load_profile("paper").judge}) == load_profile("paper")


def test_listing_and_errors_go_where_they_belong():
    listed = invoke("profiles")
    assert listed.stderr == "" and {line.split()[0] for line in listed.stdout.splitlines()} == {
        "crux-code",
        "demo",
        "paper",
        "paper-document-first",
    }
    missing = runner.invoke(app, ["profiles", "no-such-profile"])
    assert missing.exit_code == 1 and missing.stdout == "" and "no bundled profile 'no-such-profile'" in missing.stderr


def test_validate_table_on_stdout_whole_when_piped(release):
    result = invoke("validate", release, "--no-load")
    assert "checks passed" in result.stdout.rstrip().splitlines()[-1] and "error" not in result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ ok")]
    assert len(rows) >= 10
    assert max(map(len, result.stdout.splitlines())) > 80, "the table is as wide as its cells, not cut at 80"
    assert not any("…" in line for line in result.stdout.splitlines())


def test_simulate_table_holds_every_cell_whole_and_json_holds_the_same(release, tmp_path):
    args = [
        "simulate",
        release,
        "--policies",
        "random,bernoulli,bernoulli-ucb,bernoulli-rank-aware",
        "--budgets",
        "0.3,0.6,1.0",
        "--repeats",
        "2",
    ]
    table = invoke(*args)
    as_json = invoke(*args, "--json", "-")
    data = json.loads(as_json.stdout)  # stdout holds the JSON alone
    assert data["repeats"] == 2 and set(data["policies"]) == {
        "random",
        "bernoulli",
        "bernoulli-ucb",
        "bernoulli-rank-aware",
    }
    lines = table.stdout.splitlines()
    for policy, by_budget in data["policies"].items():
        row = next(line for line in lines if re.match(rf"│ {re.escape(policy)} +│", line))
        for budget in ("0.3", "0.6", "1.0"):
            cell = by_budget[budget]["precision"]
            assert f"{cell['mean']:.3f}\u00b1{cell['high'] - cell['mean']:.3f}" in table.stdout
        assert "…" not in row
    written = tmp_path / "simulation.json"
    again = invoke(*args, "--json", written)
    assert json.loads(written.read_text()) == data and "precision by budget" in again.stdout
    assert f"-> {written}" in again.stderr


def test_evaluate_and_agreement_print_json_on_stdout(release, run_file, tmp_path):
    lines = invoke("evaluate", release, "--run", run_file).stdout.splitlines()
    data = json.loads(invoke("evaluate", release, "--run", run_file, "--json", "-").stdout)
    assert set(data["metrics"]) == {"alpha-ndcg@10", "alpha-ndcg@20", "ndcg@10"}
    for name, result in data["metrics"].items():
        assert (
            f"{name}: {result['mean']:.4f} over {result['queries']:,} questions ({result['in_run']:,} in the run)"
            in lines
        )
    agreement = json.loads(
        invoke("agreement", "--judgments", release, "--against", release, "--resamples", "0", "--json", "-").stdout
    )
    assert agreement["measures"]["kappa"] == pytest.approx(1.0)
    written = tmp_path / "agreement.json"
    shown = invoke("agreement", "--judgments", release, "--against", release, "--resamples", "0", "--json", written)
    assert json.loads(written.read_text()) == agreement and "confusion (rows A, columns B)" in shown.stdout


def test_help_reads_as_english():
    """No typer placeholders (`{release}`, `<path>`, `<list[Path]>`) and no issue numbers in any -h text."""
    top = typer.main.get_command(app)
    for name in top.commands:
        text = runner.invoke(app, [name, "-h"], prog_name="researchy-subq").stdout
        assert text.startswith(f"Usage: researchy-subq {name} [OPTIONS]"), text
        assert not re.search(r"\{[a-z_]+\}|<[a-z_ \[\]]+>|list\[|issue \d", text, re.IGNORECASE), f"{name}: {text}"
    assert (
        "Usage: researchy-subq validate [OPTIONS] RELEASE\n"
        in runner.invoke(app, ["validate", "-h"], prog_name="researchy-subq").stdout
    )
    assert "--json PATH" in runner.invoke(app, ["plan", "-h"]).stdout


def test_profile_reference_is_the_docs_page_and_describes_every_key():
    from generation.profiles.reference import profile_reference, section_models

    undocumented = [
        f"{section}.{name}".lstrip(".")
        for section, model in section_models()
        for name, field in model.model_fields.items()
        if not field.description
    ]
    assert undocumented == []
    printed = invoke("profiles", "--reference").stdout
    assert printed == profile_reference()
    page = (ROOT / "docs" / "reference" / "profiles.md").read_text()
    assert page.endswith(printed), "docs/reference/profiles.md is stale: run python scripts/make_reference.py"
    for section, model in [("judge", "JudgeConfig"), ("bm25", "BM25")]:
        from generation.profiles import profile as profiles

        for key in getattr(profiles, model).model_fields:
            assert f"| `{section}.{key}` |" in printed
    assert "| `judge.context_words` | int (>= 1) | required |" in printed


def test_the_docs_shell_blocks_parse_and_continue_lines_with_one_backslash(doc_pages):
    blocks = [
        (page.relative_to(ROOT), block)
        for page in doc_pages
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S)
    ]
    assert len(blocks) > 10
    for page, block in blocks:
        assert not re.search(r"\\\\\n", block), f"{page}: a line ends in two backslashes (no continuation):\n{block}"
        parsed = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
        assert parsed.returncode == 0, f"{page}: {parsed.stderr}\n{block}"
