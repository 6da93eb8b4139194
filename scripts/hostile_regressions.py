"""The bad inputs of scripts/hostile.py that once slipped through or ended in an internal error (CHANGELOG.md,
2026-11-23 and 2026-11-25): each now an error line, rejects, or a warning saying what was assumed."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hostile_files import GOOD_RECORD, copy_tree, jsonl, raw, record


def slipped_through_cases(w: Path, env: dict) -> list[tuple[str, str, list]]:
    """Inputs that used to slip through (CHANGELOG.md, 2026-11-23): each now an error line, rejects, or a warning saying what was
    assumed."""
    from builder.standins.release_faults import plot_of_other_counts
    from generation.stages.corpus import CorpusStage

    q, release, small = env["questions"], env["release"], env["small_profile"]
    w = w / "slipped-through"
    w.mkdir(parents=True, exist_ok=True)
    not_json = raw(w / "agreement.json", b"{not json")
    no_measures = raw(w / "agreement-partial.json", json.dumps({"a": "x", "b": "y", "coverage": {}}).encode())
    build = ["build-release", "--judgments", env["judgments"], "--questions", q, "--profile", small]
    labels = env["synthetic"]["judgments"]
    garbage_chunks = w / "judge-garbage-chunks"
    (garbage_chunks / "judgments-00000-of-00001.chunks").mkdir(parents=True, exist_ok=True)
    (garbage_chunks / "judgments-00000-of-00001.chunks" / "config.json").write_text("\x00 not json")
    orphaned = copy_tree(release, w / "release-orphan-subquestions")
    path = sorted((orphaned / "data" / "subquestions").glob("train-*.parquet"))[0]
    table = pq.read_table(path)
    pq.write_table(table.set_column(1, table.schema.field("qid"), pa.array(["404"] * table.num_rows)), path)
    other_plot = copy_tree(release, w / "release-other-plot")
    plot_of_other_counts(other_plot, keep_counts_chunk=False)
    one_split = w / "previous-train-only"
    one_split.mkdir(exist_ok=True)
    manifest = json.loads((release / "manifest.json").read_text())
    manifest["stats"].pop("test", None)
    (one_split / "manifest.json").write_text(json.dumps(manifest))
    nan_run = raw(
        w / "nan.trec",
        b"".join(f"{qid} Q0 {doc} {r} nan t\n".encode() for r, (qid, doc) in enumerate(env["run_pairs"], 1)),
    )
    deleted = w / "corpus-input-deleted"
    (deleted / "in").mkdir(parents=True, exist_ok=True)
    for name in ("a", "b"):
        (deleted / "in" / f"{name}.jsonl").write_text(json.dumps({"id": f"doc-{name}", "contents": "text"}) + "\n")
    CorpusStage(None, deleted / "corpus", [deleted / "in"]).run()
    (deleted / "in" / "b.jsonl").unlink()
    gone = copy_tree(env["corpus"], w / "corpus-input-gone")
    gone_record = next((gone / "_done").glob("corpus-*.json"))
    data = json.loads(gone_record.read_text())
    data["extra"]["inputs"] = {str(w / "moved-away.json.gz"): {"bytes": 1, "mtime_ns": 1}}
    gone_record.write_text(json.dumps(data))
    no_question = copy_tree(q, w / "questions-without-question")
    table = pq.read_table(no_question / "questions.parquet")
    pq.write_table(table.drop_columns(["question"]), no_question / "questions.parquet")
    twins = jsonl(
        w / "c-twins" / "a.jsonl",
        [json.dumps({"id": i, "contents": "text", "url_hash": "AB" * 16}).encode() for i in ("doc-1", "doc-2")],
    )
    clicks = GOOD_RECORD["DocStream"] + [{"Url": "https://a", "CluewebURLHash": "AB" * 16, "Click_Cnt": 1e30}]
    over = [{"Url": f"https://{i}", "CluewebURLHash": f"{i:02d}" * 16, "Click_Cnt": 0.75} for i in range(2)]
    return [
        ("build-release: --agreement that is not JSON", "error", [*build, "--out", w / "r1", "--agreement", not_json]),
        (
            "build-release: --agreement without measures",
            "error",
            [*build, "--out", w / "r2", "--agreement", no_measures],
        ),
        (
            "agreement: --map-a with no target for grades 2-5",
            "error",
            ["agreement", "--judgments", labels, "--against", labels, "--map-a", "0:0,1:1"],
        ),
        (
            "agreement: --binary-at 99",
            "error",
            ["agreement", "--judgments", labels, "--against", labels, "--binary-at", "99", "--resamples", "0"],
        ),
        (
            "judge: a garbage chunk record",
            "error",
            [
                "judge",
                "--profile",
                small,
                "--subquestions",
                q,
                "--candidates",
                env["candidates"],
                "--index",
                env["index"],
                "--out",
                garbage_chunks,
            ],
        ),
        ("validate: sub-questions of a question that is not there", "error", ["validate", orphaned, "--no-load"]),
        ("validate: a level plot of other data", "error", ["validate", other_plot, "--no-load"]),
        (
            "validate: --against a release without the test split",
            "error",
            ["validate", release, "--against", one_split, "--no-load"],
        ),
        (
            "questions: Click_Cnt 1e30",
            "error",
            ["questions", "--input", jsonl(w / "huge-click.jsonl", [record(DocStream=clicks)]), "--out", w / "q1"],
        ),
        (
            "questions: click shares summing to 1.5",
            "error",
            ["questions", "--input", jsonl(w / "over.jsonl", [record(DocStream=over)]), "--out", w / "q2"],
        ),
        ("questions: an empty file", "error", ["questions", "--input", raw(w / "empty.jsonl", b""), "--out", w / "q3"]),
        (
            "questions: a question without sub-questions",
            "error",
            [
                "questions",
                "--input",
                jsonl(w / "bare.jsonl", [record(gpt4_decomposition={"subquestions": [], "headers": []})]),
                "--out",
                w / "q4",
            ],
        ),
        (
            "questions: --split ../x",
            "error",
            ["questions", "--input", jsonl(w / "good.jsonl", [record()]), "--split", "../x", "--out", w / "q5"],
        ),
        (
            "corpus: URL-hash an integer",
            "rejects",
            [
                "corpus",
                "--input",
                jsonl(
                    w / "c-int" / "a.jsonl",
                    [
                        json.dumps(
                            {
                                "ClueWeb22-ID": "clueweb22-en0000-00-00001",
                                "URL": "https://x",
                                "URL-hash": 12345,
                                "Clean-Text": "x",
                            }
                        ).encode(),
                        b'{"id": "d2", "contents": "fine"}',
                    ],
                ),
                "--out",
                w / "c1",
                "--rejects",
                w / "rej-c1.jsonl",
            ],
        ),
        (
            "corpus: URL-hash not 32 hex digits",
            "rejects",
            [
                "corpus",
                "--input",
                jsonl(
                    w / "c-hex" / "a.jsonl",
                    [b'{"id": "d1", "contents": "x", "url_hash": "XYZ"}', b'{"id": "d2", "contents": "fine"}'],
                ),
                "--out",
                w / "c2",
                "--rejects",
                w / "rej-c2.jsonl",
            ],
        ),
        ("corpus: one URL-hash, two documents", "warning", ["corpus", "--input", twins.parent, "--out", w / "c3"]),
        (
            "corpus: an input deleted after its shard was done",
            "error",
            ["corpus", "--input", deleted / "in", "--out", deleted / "corpus"],
        ),
        (
            "pool: a corpus whose input is gone",
            "warning",
            ["pool", "--profile", small, "--questions", q, "--runs", env["runs"], "--corpus", gone, "--out", w / "p1"],
        ),
        ("evaluate: a run of NaN scores", "error", ["evaluate", release, "--run", nan_run]),
        (
            "plan: --tokenizer /no/such/path",
            "error",
            [
                "plan",
                "--profile",
                small,
                "--subquestions",
                q,
                "--candidates",
                env["candidates"],
                "--index",
                env["index"],
                "--tokenizer",
                "/no/such/path",
            ],
        ),
        (
            "publish: --tag 'bad tag/../x'",
            "error",
            ["publish", release, "--repo", "org/researchy-subq-judgments", "--tag", "bad tag/../x"],
        ),
        (
            "retrieve: questions without their question column",
            "error",
            ["retrieve", "--profile", small, "--questions", no_question, "--index", env["index"], "--out", w / "r3"],
        ),
    ]


def ignored_options_and_empty_input_cases(w: Path, env: dict) -> list[tuple[str, str, list]]:
    """Options that did nothing, empty inputs that made a done shard of 0 rows, and the last
    internal errors; each now one error line."""
    q, release, small = env["questions"], env["release"], env["small_profile"]
    w = w / "ignored-and-empty"
    w.mkdir(parents=True, exist_ok=True)
    judge = [
        "judge",
        "--profile",
        small,
        "--subquestions",
        q,
        "--candidates",
        env["candidates"],
        "--index",
        env["index"],
    ]
    imports = ["--subquestions", q, "--judge", "someone", "--profile", small]
    missing_file = copy_tree(release, w / "release-missing-a-file")
    sorted((missing_file / "data" / "judgments").rglob("train-*.parquet"))[0].unlink()
    not_json = copy_tree(release, w / "release-manifest-not-json")
    (not_json / "manifest.json").write_text("{not json")
    repo = json.loads((release / "manifest.json").read_text())["repo"]
    return [
        (
            "judge: --endpoint on a judge that is not the openai backend",
            "error",
            [*judge, "--out", w / "j1", "--endpoint", "http://127.0.0.1:9/v1"],
        ),
        (
            "judge: --concurrency on a judge that is not the openai backend",
            "error",
            [*judge, "--out", w / "j2", "--concurrency", "4"],
        ),
        (
            "import-labels: an empty ratings file",
            "error",
            ["import-labels", raw(w / "empty.jsonl", b""), "--format", "crux-ratings", *imports, "--out", w / "i1"],
        ),
        (
            "import-labels: a qrels file of blank lines",
            "error",
            ["import-labels", raw(w / "blank.qrels", b"\n \n"), "--format", "qrels", *imports, "--out", w / "i2"],
        ),
        (
            "import-labels: an empty .gz of batch results",
            "error",
            ["import-labels", jsonl(w / "empty.jsonl.gz", []), "--format", "openai-batch", *imports, "--out", w / "i3"],
        ),
        (
            "corpus: an empty .json.gz",
            "error",
            ["corpus", "--input", jsonl(w / "c-empty" / "a.json.gz", []), "--out", w / "c1"],
        ),
        (
            "corpus: a .jsonl of blank lines",
            "error",
            ["corpus", "--input", raw(w / "c-blank" / "a.jsonl", b"\n\n"), "--out", w / "c2"],
        ),
        ("validate: a release missing one data file (loading on)", "error", ["validate", missing_file]),
        ("publish: a release missing one data file", "error", ["publish", missing_file, "--repo", repo]),
        ("publish --yes: a manifest.json that is not JSON", "error", ["publish", not_json, "--repo", repo, "--yes"]),
    ]
