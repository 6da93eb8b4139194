"""The bad inputs of scripts/hostile.py: each case makes its files under a workspace and returns the
`researchy-subq` arguments, and whether the right answer is an error line or rejects that let the run go on.
The pipeline stages' cases are here; the analysis and release commands' in hostile_release_inputs.py, the inputs
that once slipped through in hostile_regressions.py; the files they are made of in hostile_files.py."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hostile_files import copy_tree, cut_file, jsonl, profile_with, raw, record, shared_files
from hostile_regressions import ignored_options_and_empty_input_cases, slipped_through_cases
from hostile_release_inputs import release_cases


def cases(w: Path, env: dict) -> list[tuple[str, str, list]]:
    """(label, expected: "error" | "rejects" | "warning", argv). `env` holds the workspace's good inputs (see
    hostile.py)."""
    q, idx, corpus, runs, cands, release = (
        env[k] for k in ("questions", "index", "corpus", "runs", "candidates", "release")
    )
    small = env["small_profile"]
    w.mkdir(parents=True, exist_ok=True)
    a_file, foreign = shared_files(w)
    good = jsonl(w / "good.jsonl", [record()])
    bad_parquet = w / "bad.parquet"
    bad_parquet.write_bytes(b"PAR1" + b"\0" * 64)
    cut_parquet = w / "cut.parquet"
    pq.write_table(pa.Table.from_pylist([json.loads(record())] * 50), cut_parquet)
    cut_file(cut_parquet)
    both_clash = jsonl(
        w / "clash.jsonl",
        [
            record(
                id="Z", gpt4_decomposition={"subquestions": ["- a?"], "headers": [["Header only?", "- bullet only?"]]}
            ),
            record(id="Z-h0", gpt4_decomposition={"subquestions": ["- a?", "- b?"], "headers": []}),
        ],
    )
    broken_q = w / "broken-questions"
    broken_q.mkdir(exist_ok=True)
    for name in ("questions.parquet", "subquestions.parquet"):
        (broken_q / name).write_bytes(b"PAR1 garbage")
    garbage_record = copy_tree(corpus, w / "corpus-garbage-record")
    (garbage_record / "_done" / "corpus-00000-of-00001.json").write_text("{not json")
    cut_corpus = copy_tree(corpus, w / "corpus-cut")
    table = pq.read_table(cut_corpus / "corpus-00000-of-00001.parquet")
    pq.write_table(table.slice(0, 100), cut_corpus / "corpus-00000-of-00001.parquet")
    cut_runs = copy_tree(runs, w / "runs-cut")
    bm25 = pq.read_table(cut_runs / "bm25-00000-of-00001.parquet")
    pq.write_table(bm25.slice(0, 5), cut_runs / "bm25-00000-of-00001.parquet")
    no_map = copy_tree(corpus, w / "corpus-no-map")
    (no_map / "url_hash_map.parquet").unlink()
    ghost_cands = copy_tree(cands, w / "candidates-ghost")
    from generation.storage.shards import Shard, StageOutput

    shard_file = ghost_cands / "candidates-00000-of-00001.parquet"
    t = pq.read_table(shard_file)
    t = t.set_column(
        t.schema.get_field_index("docid"), "docid", pa.array(["clueweb22-en9999-99-99999"] + t["docid"].to_pylist()[1:])
    )
    pq.write_table(t, shard_file)
    record_path = ghost_cands / "_done" / "candidates-00000-of-00001.json"
    config_hash = json.loads(record_path.read_text())["config_hash"]
    record_path.unlink()
    StageOutput(ghost_cands, "candidates", config_hash).mark_done(Shard())
    stage = ["--profile", small, "--questions", q]
    return [
        ("questions: input missing", "error", ["questions", "--input", w / "nope.jsonl", "--out", w / "q1"]),
        ("questions: input is a folder", "error", ["questions", "--input", w, "--out", w / "q1"]),
        ("questions: unknown extension", "error", ["questions", "--input", a_file, "--out", w / "q1"]),
        (
            "questions: a line that is not JSON",
            "error",
            ["questions", "--input", jsonl(w / "notjson.jsonl", [b"{oops"]), "--out", w / "q1"],
        ),
        (
            "questions: invalid UTF-8",
            "error",
            ["questions", "--input", jsonl(w / "latin.jsonl", [b'{"id": "\xff"}']), "--out", w / "q1"],
        ),
        (
            "questions: invalid UTF-8 with --rejects",
            "rejects",
            ["questions", "--input", w / "latin.jsonl", "--out", w / "q1", "--rejects", w / "rej1.jsonl"],
        ),
        (
            "questions: truncated .jsonl.gz",
            "error",
            [
                "questions",
                "--input",
                cut_file(jsonl(w / "cut.jsonl.gz", [record(id=i) for i in range(300)])),
                "--out",
                w / "q1",
            ],
        ),
        (
            "questions: .gz that is not gzip",
            "error",
            ["questions", "--input", raw(w / "plain.jsonl.gz", record()), "--out", w / "q1"],
        ),
        ("questions: corrupt Parquet", "error", ["questions", "--input", bad_parquet, "--out", w / "q1"]),
        ("questions: truncated Parquet", "error", ["questions", "--input", cut_parquet, "--out", w / "q1"]),
        (
            "questions: id with whitespace",
            "error",
            ["questions", "--input", jsonl(w / "ws.jsonl", [record(id="a b")]), "--out", w / "q1"],
        ),
        (
            "questions: duplicate ids",
            "error",
            ["questions", "--input", jsonl(w / "dup.jsonl", [record(), record()]), "--out", w / "q1"],
        ),
        (
            "questions: --decomposition both with colliding ids",
            "error",
            ["questions", "--input", both_clash, "--decomposition", "both", "--out", w / "q1"],
        ),
        ("questions: --out is a file", "error", ["questions", "--input", good, "--out", a_file]),
        (
            "questions: --rejects is a folder",
            "error",
            ["questions", "--input", good, "--out", w / "q1", "--rejects", w],
        ),
        (
            "questions: a record that is a list",
            "error",
            ["questions", "--input", jsonl(w / "list.jsonl", [b"[1, 2]"]), "--out", w / "q1"],
        ),
        (
            "questions: empty question",
            "error",
            ["questions", "--input", jsonl(w / "empty.jsonl", [record(question=" ")]), "--out", w / "q1"],
        ),
        ("corpus: input missing", "error", ["corpus", "--input", w / "nope", "--out", w / "c1"]),
        (
            "corpus: truncated .json.gz",
            "error",
            [
                "corpus",
                "--input",
                cut_file(
                    jsonl(
                        w / "c-cut" / "a.json.gz",
                        [json.dumps({"id": f"d{i}", "contents": "text " * 30}).encode() for i in range(300)],
                    )
                ),
                "--out",
                w / "c1",
            ],
        ),
        (
            "corpus: .json.gz that is not gzip",
            "error",
            [
                "corpus",
                "--input",
                raw(w / "c-plain" / "a.json.gz", b'{"id": "d1", "contents": "x"}\n'),
                "--out",
                w / "c2",
            ],
        ),
        (
            "corpus: invalid UTF-8 line",
            "rejects",
            [
                "corpus",
                "--input",
                jsonl(
                    w / "c-latin" / "a.jsonl",
                    [b'{"id": "d1", "contents": "caf\xe9"}', b'{"id": "d2", "contents": "fine"}'],
                ),
                "--out",
                w / "c3",
                "--rejects",
                w / "rej2.jsonl",
            ],
        ),
        (
            "corpus: docid with whitespace",
            "rejects",
            [
                "corpus",
                "--input",
                jsonl(w / "c-ws" / "a.jsonl", [b'{"id": "d 1", "contents": "x"}', b'{"id": "d2", "contents": "fine"}']),
                "--out",
                w / "c4",
                "--rejects",
                w / "rej3.jsonl",
            ],
        ),
        ("corpus: --out is a file", "error", ["corpus", "--input", w / "c-ws", "--out", a_file]),
        (
            "corpus: --rejects is a folder",
            "error",
            ["corpus", "--input", w / "c-ws", "--out", w / "c5", "--rejects", w],
        ),
        (
            "corpus: shard outside num-shards",
            "error",
            ["corpus", "--input", w / "c-ws", "--out", w / "c6", "--shard", "3", "--num-shards", "2"],
        ),
        ("corpus: garbage completion record", "error", ["corpus", "--input", env["clueweb"], "--out", garbage_record]),
        (
            "index: corpus shard cut after it was recorded done",
            "error",
            ["index", "--corpus", cut_corpus, "--index", w / "i1"],
        ),
        ("index: --corpus missing", "error", ["index", "--corpus", w / "nope", "--index", w / "i2"]),
        ("index: --index is a file", "error", ["index", "--corpus", corpus, "--index", a_file]),
        ("retrieve: --index missing", "error", ["retrieve", *stage, "--index", w / "nope", "--out", w / "r1"]),
        ("retrieve: --index is not an index", "error", ["retrieve", *stage, "--index", foreign, "--out", w / "r1"]),
        (
            "retrieve: --questions missing",
            "error",
            ["retrieve", "--profile", small, "--questions", w / "nope", "--index", idx, "--out", w / "r1"],
        ),
        (
            "retrieve: corrupt questions.parquet",
            "error",
            ["retrieve", "--profile", small, "--questions", broken_q, "--index", idx, "--out", w / "r1"],
        ),
        (
            "profile: k1: true",
            "error",
            [
                "retrieve",
                "--profile",
                profile_with(w, "k1", "k1: 0.9", "k1: true"),
                "--questions",
                q,
                "--index",
                idx,
                "--out",
                w / "r1",
            ],
        ),
        (
            'profile: depth: "100"',
            "error",
            [
                "retrieve",
                "--profile",
                profile_with(w, "depth", "depth: 100", 'depth: "100"'),
                "--questions",
                q,
                "--index",
                idx,
                "--out",
                w / "r1",
            ],
        ),
        ("profile: k1: .inf", "error", ["profiles", profile_with(w, "inf", "k1: 0.9", "k1: .inf")]),
        ("profile: duplicate key", "error", ["profiles", profile_with(w, "dupkey", "k1: 0.9", "k1: 0.9\n  k1: 1.0")]),
        (
            "profile: cut_points of the wrong length",
            "error",
            ["profiles", profile_with(w, "cuts", "[0.37, 0.46, 0.585, 0.63, 0.72]", "[0.37, 0.46]")],
        ),
        ("profile: unknown name", "error", ["profiles", "papre"]),
        (
            "rerank: BM25 run cut to 5 rows",
            "error",
            ["rerank", *stage, "--runs", cut_runs, "--index", idx, "--out", w / "rr1"],
        ),
        ("rerank: no BM25 run", "error", ["rerank", *stage, "--runs", w / "nope", "--index", idx, "--out", w / "rr1"]),
        (
            "pool: rerank run made with another depth",
            "error",
            [
                "pool",
                "--profile",
                env["other_depth_profile"],
                "--questions",
                q,
                "--runs",
                runs,
                "--corpus",
                corpus,
                "--out",
                w / "p1",
            ],
        ),
        (
            "pool: corpus without its url-hash map",
            "error",
            ["pool", *stage, "--runs", runs, "--corpus", no_map, "--out", w / "p2"],
        ),
        (
            "judge: a candidate missing from the index",
            "error",
            [
                "judge",
                "--profile",
                small,
                "--subquestions",
                q,
                "--candidates",
                ghost_cands,
                "--index",
                idx,
                "--out",
                w / "j1",
            ],
        ),
        (
            "judge: --budget 0",
            "error",
            [
                "judge",
                "--profile",
                small,
                "--subquestions",
                q,
                "--candidates",
                cands,
                "--index",
                idx,
                "--out",
                w / "j2",
                "--budget",
                "0",
            ],
        ),
        (
            "judge: unknown --policy",
            "error",
            [
                "judge",
                "--profile",
                small,
                "--subquestions",
                q,
                "--candidates",
                cands,
                "--index",
                idx,
                "--out",
                w / "j3",
                "--budget",
                "0.5",
                "--policy",
                "best",
            ],
        ),
        *release_cases(w, env),
        *slipped_through_cases(w, env),
        *ignored_options_and_empty_input_cases(w, env),
    ]
