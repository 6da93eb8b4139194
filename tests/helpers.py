"""Helpers the tests share, imported as `from tests.helpers import ...` (fixtures live in tests/conftest.py).

Records shaped as the Hub's Researchy Questions rows, the CLI run in process, and the small pipeline's judge
inputs. Tiny models and the stand-in servers are the kit's own (builder/standins/).
"""

from __future__ import annotations


def cli(*args) -> tuple[int, str]:
    """`researchy-subq ARGS` in process: (exit code, stdout and stderr as printed)."""
    from typer.testing import CliRunner

    from builder.cli.main import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def cli_one_line(*args) -> tuple[int, str]:
    """`cli`, its output's whitespace folded to single spaces (a message wrapped by the terminal reads as one line)."""
    code, output = cli(*args)
    return code, " ".join(output.split())


def assert_one_line_error(code, output, *fragments):
    assert code != 0, output
    assert "Traceback" not in output and "internal error" not in output, output
    for fragment in fragments:
        assert fragment in output, output


def hub_record(qid=1051893, **overrides):
    """A record shaped exactly like corbyrosset/researchy_questions rows on the Hub: an integer id, and
    `Click_Cnt` a float share (the card: "normalized to be a probability distribution")."""
    record = {
        "id": qid,
        "question": "why do cats purr",
        "intrinsic_scores": {
            "ambiguous": 2,
            "incompleteness": 3,
            "assumptive": 0,
            "multi-faceted": 8,
            "knowledge-intensive": 7,
            "subjective": 1,
            "reasoning-intensive": 6,
            "harmful": 0,
        },
        "DocStream": [
            {
                "Url": "https://www.catscience.org/why-cats-purr",
                "CluewebURLHash": "8C3D0A1F7E2B4C5D6E7F8091A2B3C4D5",
                "UrlLanguage": "en",
                "Title": "Why Cats Purr",
                "Snippet": "Cats purr when...",
                "Click_Cnt": 0.75,
            },
            {
                "Url": "https://pets.example.com/purring",
                "CluewebURLHash": "00FF00FF00FF00FF00FF00FF00FF00FF",
                "UrlLanguage": "en",
                "Title": "Purring",
                "Snippet": "",
                "Click_Cnt": 0.25,
            },
        ],
        "gpt4_decomposition": {
            "llm": "gpt-4",
            "type": "decomposition",
            "headers": [
                [
                    "What is purring?",
                    " - How do cats produce the purring sound?",
                    " - Which cats can purr?",
                    " - Do big cats purr?",
                ],
                ["Why do cats purr?", " - Do cats purr when they are happy?"],
            ],
            "subquestions": [
                "- What is purring?",
                "- How do cats produce the purring sound?",
                "- Which cats can purr?",
                "- Do big cats purr?",
                "- Why do cats purr?",
                "- Do cats purr when they are happy?",
                "- Does purring heal bones?",
            ],
            "queries": ["why do cats purr", "how do cats purr"],
        },
        "decompositional_score": 0.83,
        "nonfactoid_score": 0.91,
    }
    record.update(overrides)
    return record


# --- the small pipeline's judge inputs (the `small_pipeline` fixture) ---
def folders(small_pipeline):
    return [small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"]]


def rows(folder):
    import pyarrow.parquet as pq

    table = pq.read_table(next(folder.glob("judgments-*.parquet")))
    return sorted(table.to_pylist(), key=lambda r: (r["subq_id"], r["docid"]))


def judge_args(profile, small_pipeline, out, *more) -> list[str]:
    """`judge` over the small pipeline's inputs, as strings (for the CLI in process, a subprocess or JSON)."""
    q, c, i = folders(small_pipeline)
    args = ["judge", "--profile", profile, "--subquestions", q, "--candidates", c, "--index", i, "--out", out, *more]
    return [str(a) for a in args]


def in_a_fresh_process(code: str, *args) -> object:
    """Runs `code` with this interpreter in a new process; returns the JSON its last stdout line holds."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def plan_ids(plan) -> list[str]:
    """The OpenAI Batch custom_ids of a pair plan (rows with subq_id, qid and docid, as the judge stage has them)."""
    from generation.judging.batch_files import custom_id

    return [custom_id(row["qid"], row["docid"], row["subq_id"]) for row in plan]


def transformers_judge(model, **settings):
    """The paper profile's judge section on the transformers backend for the local `model`, float32 on the CPU, with
    `settings` changed, validated as a profile's section is: what `TransformersBackend(model, section)` runs as."""
    from generation.profiles.profile import JudgeConfig, load_profile

    data = {
        **load_profile("paper").judge.model_dump(),
        **{"backend": "transformers", "model": str(model), "dtype": "float32", "device": "cpu"},
        **settings,
    }
    return JudgeConfig.model_validate(data)
