import pytest

from generation.profiles.profile import ProfileError, bundled_profiles, load_profile, profile_path, with_overrides


def test_bundled_profiles_load():
    assert bundled_profiles() == ["crux-code", "demo", "paper", "paper-document-first"]
    for name in bundled_profiles():
        assert load_profile(name).name == name


def test_a_profile_with_a_base_changes_only_the_keys_it_gives():
    paper, variant = load_profile("paper"), load_profile("paper-document-first")
    assert variant.judge.prompt == "crux-paper-document-first"
    as_paper = variant.model_dump() | {"name": "paper", "description": paper.description}
    as_paper["judge"]["prompt"] = "crux-paper"
    assert as_paper == paper.model_dump()
    assert variant.config_hash("bm25", "rerank", "pool") == paper.config_hash("bm25", "rerank", "pool")
    assert variant.config_hash("judge") != paper.config_hash("judge")


def test_a_base_is_a_bundled_name_or_a_path_beside_the_file_and_never_itself(tmp_path):
    (tmp_path / "mine.yaml").write_text("base: paper\nname: mine\njudge:\n  quantization: fp8\n")
    (tmp_path / "yours.yaml").write_text("base: ./mine.yaml\nname: yours\npool:\n  bm25_top: 5\n")
    yours = load_profile(tmp_path / "yours.yaml")
    assert (yours.name, yours.judge.quantization, yours.pool.bm25_top, yours.pool.rerank_top) == ("yours", "fp8", 5, 20)
    (tmp_path / "loop.yaml").write_text("base: ./loop2.yaml\nname: loop\n")
    (tmp_path / "loop2.yaml").write_text("base: ./loop.yaml\nname: loop2\n")
    with pytest.raises(ProfileError, match="leads back to itself"):
        load_profile(tmp_path / "loop.yaml")
    (tmp_path / "typo.yaml").write_text("base: paper\njudge:\n  promt: crux-code\n")
    with pytest.raises(ProfileError, match=r"typo.yaml: key judge.promt: unknown key"):
        load_profile(tmp_path / "typo.yaml")
    (tmp_path / "nobase.yaml").write_text("base: papers\n")
    with pytest.raises(ProfileError, match="no bundled profile 'papers'"):
        load_profile(tmp_path / "nobase.yaml")


def test_overrides_set_single_keys_as_yaml_values_and_are_validated():
    paper = load_profile("paper")
    changed = with_overrides(paper, ["judge.quantization=fp8", "judge.batch_size=16", "pool.include_clicked=false"])
    assert (changed.judge.quantization, changed.judge.batch_size, changed.pool.include_clicked) == ("fp8", 16, False)
    assert with_overrides(paper, []).model_dump() == paper.model_dump()
    for bad, message in [
        ("judge.quantization", "expected SECTION.KEY=VALUE"),
        ("judge.prompt=crux-papr", "key judge.prompt"),
        ("judge.batchsize=4", "key judge.batchsize: unknown key"),
    ]:
        with pytest.raises(ProfileError, match=message):
            with_overrides(paper, [bad])


def test_paper_and_code_differ_where_design_table_says():
    paper, code = load_profile("paper"), load_profile("crux-code")
    assert (
        (paper.bm25.k1, paper.bm25.b, paper.bm25.depth)
        == (0.9, 0.4, 100)
        == (code.bm25.k1, code.bm25.b, code.bm25.depth)
    )
    assert paper.rerank.model == code.rerank.model == "Qwen/Qwen3-Reranker-0.6B"
    assert (
        paper.rerank.instruction
        == code.rerank.instruction
        == ("Given the list of questions as query, retrieve relevant passages that answer the questions.")
    )
    assert (paper.rerank.query_builder, code.rerank.query_builder) == ("join-subquestions", "crux-code-list")
    assert (code.rerank.max_doc_words, code.rerank.max_length, code.rerank.max_subquestions) == (5000, 8192, 10)
    assert (paper.pool.rule, paper.pool.bm25_top, paper.pool.rerank_top) == ("union", 20, 20)
    assert (code.pool.rule, code.pool.bm25_top, code.pool.rerank_top) == ("sequential", 5, 20)
    assert (paper.judge.prompt, code.judge.prompt) == ("crux-paper", "crux-code")
    for judge in (paper.judge, code.judge):
        assert judge.model.startswith("meta-llama/Llama-3.3-70B")
        assert (judge.context_words, judge.max_new_tokens, judge.temperature) == (2048, 3, 0.0)
        assert (judge.tensor_parallel_size, judge.max_model_len, judge.dtype) == (4, 8192, "bfloat16")
    assert paper.config_hash() != code.config_hash()
    assert paper.config_hash("bm25") == code.config_hash("bm25")


def write(tmp_path, text):
    path = tmp_path / "custom.yaml"
    path.write_text(text)
    return path


def test_unknown_key_names_file_and_key(tmp_path):
    text = profile_path("demo").read_text().replace("  k1: 0.9", "  k1: 0.9\n  k3: 7")
    path = write(tmp_path, text)
    with pytest.raises(ProfileError, match=rf"{path}: key bm25.k3: unknown key"):
        load_profile(path)


def test_bad_value_names_file_key_and_value(tmp_path):
    path = write(tmp_path, profile_path("demo").read_text().replace("rule: union", "rule: everything"))
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert f"{path}: key pool.rule:" in str(caught.value) and "'everything'" in str(caught.value)


def test_cut_points_must_increase(tmp_path):
    path = write(tmp_path, profile_path("demo").read_text().replace("[0.37, 0.46, 0.585, 0.63, 0.72]", "[0.5, 0.3]"))
    with pytest.raises(ProfileError, match="key judge: .*strictly increasing"):
        load_profile(path)


def test_broken_yaml_and_unknown_name(tmp_path):
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_profile(write(tmp_path, "bm25: [unclosed\n"))
    with pytest.raises(
        ProfileError, match=r"no bundled profile .papre. \(bundled: crux-code, demo, paper, paper-document-first\)"
    ):
        load_profile("papre")


SERVER = """  backend: openai
  openai:
    endpoint: http://gpu-node:8000/v1
    request_shape: chat
    api_key_env: JUDGE_KEY
    concurrency: 32
"""


def openai_profile(tmp_path, server=SERVER):
    text = (
        profile_path("paper")
        .read_text()
        .replace("  backend: vllm\n  model: meta-llama", server + "  model: meta-llama")
    )
    return write(tmp_path, text)


def test_openai_backend_section_is_validated_strictly(tmp_path):
    judge = load_profile(openai_profile(tmp_path)).judge
    assert (judge.backend, judge.openai.request_shape, judge.openai.concurrency) == ("openai", "chat", 32)
    assert (judge.openai.digit_logprobs, judge.openai.max_retries) == ("logprob_token_ids", 5)
    served = load_profile(openai_profile(tmp_path))
    assert "openai" in judge.model_dump() and served.config_hash() != load_profile("paper").config_hash()
    moved = load_profile(openai_profile(tmp_path, SERVER.replace("gpu-node", "other-node").replace("32", "8")))
    assert moved.config_hash() == served.config_hash(), "where the server runs is not what the judgments are"
    chat = load_profile(openai_profile(tmp_path, SERVER.replace("request_shape: chat", "request_shape: completions")))
    assert chat.config_hash() != served.config_hash()
    with pytest.raises(ProfileError, match="key judge: .*backend openai needs the openai section"):
        load_profile(openai_profile(tmp_path, "  backend: openai\n"))
    for bad, key in [
        ("request_shape: chat", "request_shape: responses"),
        ("concurrency: 32", "concurrency: 0"),
        ("concurrency: 32", "concurrency: 32\n    retries: 3"),
        ("endpoint: http://gpu-node:8000/v1", "endpoint: gpu-node:8000"),
        ("endpoint: http://gpu-node:8000/v1", "endpoint: http://user:sk-123@gpu-node:8000/v1"),
        ("api_key_env: JUDGE_KEY", "api_key_env: sk-live-key"),
    ]:
        with pytest.raises(ProfileError, match="key judge.openai."):
            load_profile(openai_profile(tmp_path, SERVER.replace(bad, key)))


def test_a_profile_without_a_server_hashes_as_before_the_section_existed():
    for name in bundled_profiles():
        assert "openai" not in load_profile(name).judge.model_dump()
