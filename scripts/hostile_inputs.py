"""The bad inputs of scripts/hostile.py: each case makes its files under a workspace and returns the
`researchy-subq` arguments, and whether the right answer is an error line or rejects that let the run go on."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from generation.profiles import PROFILE_DIR

GOOD_RECORD = {"id": 7, "question": "why do cats purr?", "DocStream": [],
               "gpt4_decomposition": {"subquestions": ["- what is purring?", "- when do cats purr?"], "headers": []}}


def jsonl(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(line + b"\n" for line in lines)
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def raw(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def record(**fields) -> bytes:
    return json.dumps({**GOOD_RECORD, **fields}).encode()


def profile_with(w: Path, name: str, old: str, new: str) -> Path:
    path = w / f"{name}.yaml"
    path.write_text((PROFILE_DIR / "demo.yaml").read_text().replace(old, new, 1))
    return path


def cut_file(path: Path, keep: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def slipped_through_cases(w: Path, env: dict) -> list[tuple[str, str, list]]:
    """Inputs that used to slip through (CHANGELOG.md, 2026-11-23): each now an error line, rejects, or a warning saying what was
    assumed."""
    from hostile_release import plot_of_other_counts

    from generation.stages.corpus import build_corpus

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
    nan_run = raw(w / "nan.trec", b"".join(f"{qid} Q0 {doc} {r} nan t\n".encode()
                                           for r, (qid, doc) in enumerate(env["run_pairs"], 1)))
    deleted = w / "corpus-input-deleted"
    (deleted / "in").mkdir(parents=True, exist_ok=True)
    for name in ("a", "b"):
        (deleted / "in" / f"{name}.jsonl").write_text(json.dumps({"id": f"doc-{name}", "contents": "text"}) + "\n")
    build_corpus([deleted / "in"], deleted / "corpus")
    (deleted / "in" / "b.jsonl").unlink()
    gone = copy_tree(env["corpus"], w / "corpus-input-gone")
    gone_record = next((gone / "_done").glob("corpus-*.json"))
    data = json.loads(gone_record.read_text())
    data["extra"]["inputs"] = {str(w / "moved-away.json.gz"): {"bytes": 1, "mtime_ns": 1}}
    gone_record.write_text(json.dumps(data))
    no_question = copy_tree(q, w / "questions-without-question")
    table = pq.read_table(no_question / "questions.parquet")
    pq.write_table(table.drop_columns(["question"]), no_question / "questions.parquet")
    twins = jsonl(w / "c-twins" / "a.jsonl", [json.dumps({"id": i, "contents": "text", "url_hash": "AB" * 16}).encode()
                                              for i in ("doc-1", "doc-2")])
    clicks = GOOD_RECORD["DocStream"] + [{"Url": "https://a", "CluewebURLHash": "AB" * 16, "Click_Cnt": 1e30}]
    over = [{"Url": f"https://{i}", "CluewebURLHash": f"{i:02d}" * 16, "Click_Cnt": 0.75} for i in range(2)]
    return [
        ("build-release: --agreement that is not JSON", "error", [*build, "--out", w / "r1", "--agreement", not_json]),
        ("build-release: --agreement without measures", "error", [*build, "--out", w / "r2", "--agreement", no_measures]),
        ("agreement: --map-a with no target for grades 2-5", "error", ["agreement", "--judgments", labels, "--against",
                                                                      labels, "--map-a", "0:0,1:1"]),
        ("agreement: --binary-at 99", "error", ["agreement", "--judgments", labels, "--against", labels, "--binary-at",
                                                "99", "--resamples", "0"]),
        ("judge: a garbage chunk record", "error", ["judge", "--profile", small, "--subquestions", q, "--candidates",
                                                    env["candidates"], "--index", env["index"], "--out", garbage_chunks]),
        ("validate: sub-questions of a question that is not there", "error", ["validate", orphaned, "--no-load"]),
        ("validate: a level plot of other data", "error", ["validate", other_plot, "--no-load"]),
        ("validate: --against a release without the test split", "error", ["validate", release, "--against", one_split,
                                                                           "--no-load"]),
        ("questions: Click_Cnt 1e30", "error", ["questions", "--input", jsonl(w / "huge-click.jsonl", [record(
            DocStream=clicks)]), "--out", w / "q1"]),
        ("questions: click shares summing to 1.5", "error", ["questions", "--input", jsonl(w / "over.jsonl", [record(
            DocStream=over)]), "--out", w / "q2"]),
        ("questions: an empty file", "error", ["questions", "--input", raw(w / "empty.jsonl", b""), "--out", w / "q3"]),
        ("questions: a question without sub-questions", "error", ["questions", "--input", jsonl(
            w / "bare.jsonl", [record(gpt4_decomposition={"subquestions": [], "headers": []})]), "--out", w / "q4"]),
        ("questions: --split ../x", "error", ["questions", "--input", jsonl(w / "good.jsonl", [record()]), "--split",
                                              "../x", "--out", w / "q5"]),
        ("corpus: URL-hash an integer", "rejects", ["corpus", "--input", jsonl(w / "c-int" / "a.jsonl", [json.dumps(
            {"ClueWeb22-ID": "clueweb22-en0000-00-00001", "URL": "https://x", "URL-hash": 12345,
             "Clean-Text": "x"}).encode(), b'{"id": "d2", "contents": "fine"}']), "--out", w / "c1", "--rejects",
            w / "rej-c1.jsonl"]),
        ("corpus: URL-hash not 32 hex digits", "rejects", ["corpus", "--input", jsonl(w / "c-hex" / "a.jsonl", [
            b'{"id": "d1", "contents": "x", "url_hash": "XYZ"}', b'{"id": "d2", "contents": "fine"}']), "--out",
            w / "c2", "--rejects", w / "rej-c2.jsonl"]),
        ("corpus: one URL-hash, two documents", "warning", ["corpus", "--input", twins.parent, "--out", w / "c3"]),
        ("corpus: an input deleted after its shard was done", "error", ["corpus", "--input", deleted / "in", "--out",
                                                                        deleted / "corpus"]),
        ("pool: a corpus whose input is gone", "warning", ["pool", "--profile", small, "--questions", q, "--runs",
                                                           env["runs"], "--corpus", gone, "--out", w / "p1"]),
        ("evaluate: a run of NaN scores", "error", ["evaluate", release, "--run", nan_run]),
        ("plan: --tokenizer /no/such/path", "error", ["plan", "--profile", small, "--subquestions", q, "--candidates",
                                                      env["candidates"], "--index", env["index"], "--tokenizer",
                                                      "/no/such/path"]),
        ("publish: --tag 'bad tag/../x'", "error", ["publish", release, "--repo", "org/researchy-subq-judgments",
                                                    "--tag", "bad tag/../x"]),
        ("retrieve: questions without their question column", "error", ["retrieve", "--profile", small, "--questions",
                                                                        no_question, "--index", env["index"], "--out",
                                                                        w / "r3"]),
    ]


def issue28a_cases(w: Path, env: dict) -> list[tuple[str, str, list]]:
    """Options that did nothing, empty inputs that made a done shard of 0 rows, and the last
    internal errors; each now one error line."""
    q, release, small = env["questions"], env["release"], env["small_profile"]
    w = w / "issue28a"
    w.mkdir(parents=True, exist_ok=True)
    judge = ["judge", "--profile", small, "--subquestions", q, "--candidates", env["candidates"], "--index",
             env["index"]]
    imports = ["--subquestions", q, "--judge", "someone", "--profile", small]
    missing_file = copy_tree(release, w / "release-missing-a-file")
    sorted((missing_file / "data" / "judgments").rglob("train-*.parquet"))[0].unlink()
    not_json = copy_tree(release, w / "release-manifest-not-json")
    (not_json / "manifest.json").write_text("{not json")
    repo = json.loads((release / "manifest.json").read_text())["repo"]
    return [
        ("judge: --endpoint on a judge that is not the openai backend", "error", [*judge, "--out", w / "j1",
                                                                                   "--endpoint", "http://127.0.0.1:9/v1"]),
        ("judge: --concurrency on a judge that is not the openai backend", "error", [*judge, "--out", w / "j2",
                                                                                      "--concurrency", "4"]),
        ("import-labels: an empty ratings file", "error", ["import-labels", raw(w / "empty.jsonl", b""), "--format",
                                                           "crux-ratings", *imports, "--out", w / "i1"]),
        ("import-labels: a qrels file of blank lines", "error", ["import-labels", raw(w / "blank.qrels", b"\n \n"),
                                                                 "--format", "qrels", *imports, "--out", w / "i2"]),
        ("import-labels: an empty .gz of batch results", "error", ["import-labels", jsonl(w / "empty.jsonl.gz", []),
                                                                   "--format", "openai-batch", *imports, "--out",
                                                                   w / "i3"]),
        ("corpus: an empty .json.gz", "error", ["corpus", "--input", jsonl(w / "c-empty" / "a.json.gz", []), "--out",
                                                w / "c1"]),
        ("corpus: a .jsonl of blank lines", "error", ["corpus", "--input", raw(w / "c-blank" / "a.jsonl", b"\n\n"),
                                                      "--out", w / "c2"]),
        ("validate: a release missing one data file (loading on)", "error", ["validate", missing_file]),
        ("publish: a release missing one data file", "error", ["publish", missing_file, "--repo", repo]),
        ("publish --yes: a manifest.json that is not JSON", "error", ["publish", not_json, "--repo", repo, "--yes"]),
    ]


def cases(w: Path, env: dict) -> list[tuple[str, str, list]]:
    """(label, expected: "error" | "rejects" | "warning", argv). `env` holds the workspace's good inputs (see
    hostile.py)."""
    q, idx, corpus, runs, cands, release = (env[k] for k in ("questions", "index", "corpus", "runs", "candidates",
                                                            "release"))
    small = env["small_profile"]
    w.mkdir(parents=True, exist_ok=True)
    a_file = w / "a-file.txt"
    a_file.write_text("x")
    foreign = w / "foreign"
    foreign.mkdir(exist_ok=True)
    (foreign / "notes.txt").write_text("someone's work")
    good = jsonl(w / "good.jsonl", [record()])
    bad_parquet = w / "bad.parquet"
    bad_parquet.write_bytes(b"PAR1" + b"\0" * 64)
    cut_parquet = w / "cut.parquet"
    pq.write_table(pa.Table.from_pylist([json.loads(record())] * 50), cut_parquet)
    cut_file(cut_parquet)
    both_clash = jsonl(w / "clash.jsonl", [record(id="Z", gpt4_decomposition={
        "subquestions": ["- a?"], "headers": [["Header only?", "- bullet only?"]]}), record(id="Z-h0", gpt4_decomposition={
            "subquestions": ["- a?", "- b?"], "headers": []})])
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
    from generation.shards import Shard, StageOutput
    shard_file = ghost_cands / "candidates-00000-of-00001.parquet"
    t = pq.read_table(shard_file)
    t = t.set_column(t.schema.get_field_index("docid"), "docid",
                     pa.array(["clueweb22-en9999-99-99999"] + t["docid"].to_pylist()[1:]))
    pq.write_table(t, shard_file)
    record_path = ghost_cands / "_done" / "candidates-00000-of-00001.json"
    config_hash = json.loads(record_path.read_text())["config_hash"]
    record_path.unlink()
    StageOutput(ghost_cands, "candidates", config_hash).mark_done(Shard())
    run = w / "run.trec"
    run.write_text("".join(f"{qid} Q0 {doc} {r} {10 - r} t\n" for r, (qid, doc) in enumerate(env["run_pairs"], 1)))
    dup_run = w / "dup.trec"
    dup_run.write_text("q Q0 d1 1 2.0 t\nq Q0 d1 2 1.0 t\n")
    stranger_run = w / "stranger.trec"
    stranger_run.write_text("no-such-question Q0 d1 1 2.0 t\n")
    short_run = w / "short.trec"
    short_run.write_text("q Q0 d1 1\n")
    typo = w / "typo.yaml"
    typo.write_text("levles:\n  5: [0.0, 1.0]\n")
    inverted = w / "inverted.yaml"
    inverted.write_text("levels:\n  5: [0.5, 0.1]\n")
    qrels = w / "other.qrels"
    qrels.write_text("nobody 0 nothing 3\n")
    stage = ["--profile", small, "--questions", q]
    return [
        ("questions: input missing", "error", ["questions", "--input", w / "nope.jsonl", "--out", w / "q1"]),
        ("questions: input is a folder", "error", ["questions", "--input", w, "--out", w / "q1"]),
        ("questions: unknown extension", "error", ["questions", "--input", a_file, "--out", w / "q1"]),
        ("questions: a line that is not JSON", "error", ["questions", "--input", jsonl(w / "notjson.jsonl", [b"{oops"]),
                                                         "--out", w / "q1"]),
        ("questions: invalid UTF-8", "error", ["questions", "--input", jsonl(w / "latin.jsonl", [b'{"id": "\xff"}']),
                                               "--out", w / "q1"]),
        ("questions: invalid UTF-8 with --rejects", "rejects", ["questions", "--input", w / "latin.jsonl", "--out",
                                                                w / "q1", "--rejects", w / "rej1.jsonl"]),
        ("questions: truncated .jsonl.gz", "error", ["questions", "--input", cut_file(jsonl(
            w / "cut.jsonl.gz", [record(id=i) for i in range(300)])), "--out", w / "q1"]),
        ("questions: .gz that is not gzip", "error", ["questions", "--input", raw(w / "plain.jsonl.gz", record()),
                                                      "--out", w / "q1"]),
        ("questions: corrupt Parquet", "error", ["questions", "--input", bad_parquet, "--out", w / "q1"]),
        ("questions: truncated Parquet", "error", ["questions", "--input", cut_parquet, "--out", w / "q1"]),
        ("questions: id with whitespace", "error", ["questions", "--input", jsonl(w / "ws.jsonl", [record(id="a b")]),
                                                    "--out", w / "q1"]),
        ("questions: duplicate ids", "error", ["questions", "--input", jsonl(w / "dup.jsonl", [record(), record()]),
                                               "--out", w / "q1"]),
        ("questions: --decomposition both with colliding ids", "error",
         ["questions", "--input", both_clash, "--decomposition", "both", "--out", w / "q1"]),
        ("questions: --out is a file", "error", ["questions", "--input", good, "--out", a_file]),
        ("questions: --rejects is a folder", "error", ["questions", "--input", good, "--out", w / "q1", "--rejects", w]),
        ("questions: a record that is a list", "error", ["questions", "--input", jsonl(w / "list.jsonl", [b"[1, 2]"]),
                                                         "--out", w / "q1"]),
        ("questions: empty question", "error", ["questions", "--input", jsonl(w / "empty.jsonl", [record(question=" ")]),
                                                "--out", w / "q1"]),
        ("corpus: input missing", "error", ["corpus", "--input", w / "nope", "--out", w / "c1"]),
        ("corpus: truncated .json.gz", "error", ["corpus", "--input", cut_file(jsonl(w / "c-cut" / "a.json.gz", [
            json.dumps({"id": f"d{i}", "contents": "text " * 30}).encode() for i in range(300)])), "--out", w / "c1"]),
        ("corpus: .json.gz that is not gzip", "error", ["corpus", "--input", raw(w / "c-plain" / "a.json.gz",
                                                                               b'{"id": "d1", "contents": "x"}\n'),
                                                        "--out", w / "c2"]),
        ("corpus: invalid UTF-8 line", "rejects", ["corpus", "--input", jsonl(w / "c-latin" / "a.jsonl", [
            b'{"id": "d1", "contents": "caf\xe9"}', b'{"id": "d2", "contents": "fine"}']), "--out", w / "c3",
            "--rejects", w / "rej2.jsonl"]),
        ("corpus: docid with whitespace", "rejects", ["corpus", "--input", jsonl(w / "c-ws" / "a.jsonl", [
            b'{"id": "d 1", "contents": "x"}', b'{"id": "d2", "contents": "fine"}']), "--out", w / "c4",
            "--rejects", w / "rej3.jsonl"]),
        ("corpus: --out is a file", "error", ["corpus", "--input", w / "c-ws", "--out", a_file]),
        ("corpus: --rejects is a folder", "error", ["corpus", "--input", w / "c-ws", "--out", w / "c5", "--rejects", w]),
        ("corpus: shard outside num-shards", "error", ["corpus", "--input", w / "c-ws", "--out", w / "c6", "--shard", "3",
                                                       "--num-shards", "2"]),
        ("corpus: garbage completion record", "error", ["corpus", "--input", env["clueweb"], "--out", garbage_record]),
        ("index: corpus shard cut after it was recorded done", "error", ["index", "--corpus", cut_corpus, "--index",
                                                                         w / "i1"]),
        ("index: --corpus missing", "error", ["index", "--corpus", w / "nope", "--index", w / "i2"]),
        ("index: --index is a file", "error", ["index", "--corpus", corpus, "--index", a_file]),
        ("retrieve: --index missing", "error", ["retrieve", *stage, "--index", w / "nope", "--out", w / "r1"]),
        ("retrieve: --index is not an index", "error", ["retrieve", *stage, "--index", foreign, "--out", w / "r1"]),
        ("retrieve: --questions missing", "error", ["retrieve", "--profile", small, "--questions", w / "nope",
                                                    "--index", idx, "--out", w / "r1"]),
        ("retrieve: corrupt questions.parquet", "error", ["retrieve", "--profile", small, "--questions", broken_q,
                                                          "--index", idx, "--out", w / "r1"]),
        ("profile: k1: true", "error", ["retrieve", "--profile", profile_with(w, "k1", "k1: 0.9", "k1: true"),
                                        "--questions", q, "--index", idx, "--out", w / "r1"]),
        ("profile: depth: \"100\"", "error", ["retrieve", "--profile", profile_with(w, "depth", "depth: 100",
                                                                                     'depth: "100"'),
                                              "--questions", q, "--index", idx, "--out", w / "r1"]),
        ("profile: k1: .inf", "error", ["profiles", profile_with(w, "inf", "k1: 0.9", "k1: .inf")]),
        ("profile: duplicate key", "error", ["profiles", profile_with(w, "dupkey", "k1: 0.9", "k1: 0.9\n  k1: 1.0")]),
        ("profile: cut_points of the wrong length", "error", ["profiles", profile_with(
            w, "cuts", "[0.37, 0.46, 0.585, 0.63, 0.72]", "[0.37, 0.46]")]),
        ("profile: unknown name", "error", ["profiles", "papre"]),
        ("rerank: BM25 run cut to 5 rows", "error", ["rerank", *stage, "--runs", cut_runs, "--index", idx, "--out",
                                                     w / "rr1"]),
        ("rerank: no BM25 run", "error", ["rerank", *stage, "--runs", w / "nope", "--index", idx, "--out", w / "rr1"]),
        ("pool: rerank run made with another depth", "error", ["pool", "--profile", env["other_depth_profile"],
                                                               "--questions", q, "--runs", runs, "--corpus", corpus,
                                                               "--out", w / "p1"]),
        ("pool: corpus without its url-hash map", "error", ["pool", *stage, "--runs", runs, "--corpus", no_map, "--out",
                                                            w / "p2"]),
        ("judge: a candidate missing from the index", "error", ["judge", "--profile", small, "--subquestions", q,
                                                               "--candidates", ghost_cands, "--index", idx, "--out",
                                                               w / "j1"]),
        ("judge: --budget 0", "error", ["judge", "--profile", small, "--subquestions", q, "--candidates", cands,
                                        "--index", idx, "--out", w / "j2", "--budget", "0"]),
        ("judge: unknown --policy", "error", ["judge", "--profile", small, "--subquestions", q, "--candidates", cands,
                                              "--index", idx, "--out", w / "j3", "--budget", "0.5", "--policy", "best"]),
        ("plan: --utilisation 0", "error", ["plan", "--profile", small, "--subquestions", q, "--candidates", cands,
                                            "--index", idx, "--utilisation", "0"]),
        ("simulate: --budgets abc", "error", ["simulate", release, "--budgets", "abc"]),
        ("simulate: budget 1.5", "error", ["simulate", release, "--budgets", "0.5,1.5"]),
        ("simulate: --repeats 0", "error", ["simulate", release, "--repeats", "0"]),
        ("simulate: release missing", "error", ["simulate", w / "nope"]),
        ("evaluate: alpha-ndcg@0", "error", ["evaluate", release, "--run", run, "--metrics", "alpha-ndcg@0"]),
        ("evaluate: alpha 1.5", "error", ["evaluate", release, "--run", run, "--metrics", "alpha-ndcg@10:1.5"]),
        ("evaluate: duplicate docids in a run", "error", ["evaluate", release, "--run", dup_run]),
        ("evaluate: a run over zero questions", "error", ["evaluate", release, "--run", stranger_run]),
        ("evaluate: a malformed run line", "error", ["evaluate", release, "--run", short_run]),
        ("agreement: --against missing", "error", ["agreement", "--judgments", release, "--against", w / "nope"]),
        ("agreement: zero shared pairs", "error", ["agreement", "--judgments", release, "--against", qrels]),
        ("agreement: bad scale mapping", "error", ["agreement", "--judgments", release, "--against", release,
                                                   "--map-a", "0:x"]),
        ("validate: release missing", "error", ["validate", w / "nope"]),
        ("validate: --expect with a misspelt key", "error", ["validate", release, "--expect", typo, "--no-load"]),
        ("validate: --expect with low > high", "error", ["validate", release, "--expect", inverted, "--no-load"]),
        ("publish: invalid repo id", "error", ["publish", release, "--repo", "not a repo"]),
        ("publish: release missing", "error", ["publish", w / "nope", "--repo", "org/name"]),
        ("demo: --out is someone else's folder", "error", ["demo", "--out", foreign]),
        ("build-release: --out is someone else's folder", "error", ["build-release", "--judgments", env["judgments"],
                                                                    "--questions", q, "--out", foreign, "--profile",
                                                                    "demo"]),
        ("build-release: --out is a file", "error", ["build-release", "--judgments", env["judgments"], "--questions", q,
                                                     "--out", a_file, "--profile", "demo"]),
        *slipped_through_cases(w, env),
        *issue28a_cases(w, env),
    ]
