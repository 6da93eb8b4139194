"""The `openai` judge backend against a stand-in OpenAI-compatible server on loopback (builder/standins/openai_server.py):
request shapes, both modes, retries, the start-up probe. The real `vllm serve` is tests/generation/backends/test_vllm_server.py."""

import time

import pytest

from builder.standins.openai_server import Fault, StandIn, fingerprint
from generation.backends.openai_server import ServerError, make_judge, retry_after_seconds
from generation.judging.batch_files import export_judge
from generation.judging.judges import BackendUnavailable, LLMJudge, Pair, distribution
from generation.profiles.profile import JudgeConfig, load_profile

QUESTIONS = ["Why are honey bee populations declining?", "Do neonicotinoid pesticides harm bees?"]
DOCUMENTS = [
    "Varroa mites spread deformed wing virus among honey bees.",
    "A recipe for lemon cake with honey glaze and almonds.",
    "Colony collapse disorder " + "was reported in many states and countries " * 80,
]  # cut by tokens
PAIRS = [Pair(q, d) for q in QUESTIONS for d in DOCUMENTS]
KEY_ENV = "RESEARCHY_TEST_JUDGE_KEY"


def config(endpoint, shape="completions", mode="generate", **server) -> JudgeConfig:
    """The paper's judge section on the stand-in's model, validated as a profile file would be."""
    data = load_profile("paper").judge.model_dump()
    server = {"endpoint": endpoint, "request_shape": shape, "retry_backoff_s": 0.01, **server}
    return JudgeConfig.model_validate(
        {
            **data,
            "backend": "openai",
            "model": "standin-judge",
            "mode": mode,
            "max_model_len": 384,
            "context_words": 400,
            "openai": server,
        }
    )


def judge_on(standin, tokenizer, **kwargs) -> LLMJudge:
    return make_judge(config(standin.endpoint, **kwargs), tokenizer)


def reference(cfg, tokenizer) -> LLMJudge:
    """The same judge with no backend: the prompts the in-process backends get."""
    return LLMJudge(cfg, None, tokenizer, "reference")


def bodies(standin) -> list[dict]:
    return [body for _, path, body in standin.received if path != "/v1/models"][1:]  # the probe's first


@pytest.mark.parametrize("shape", ["completions", "chat"])
def test_generate_mode_sends_the_kits_prompt_and_grades_the_answer(standin, tokenizer, shape):
    judge = judge_on(standin, tokenizer, shape=shape)
    grades = judge.grade(PAIRS)
    ref = reference(judge.config, tokenizer)
    sent = {fingerprint(b): b for b in bodies(standin)}
    assert len(sent) == len(PAIRS)
    for pair, grade in zip(PAIRS, grades):
        ids, cut = ref.encode_pair(pair)
        if shape == "completions":  # the kit's own token ids: its chat template, token cut and one BOS
            body = sent[sum(ids)]
            assert body["prompt"] == ids and "messages" not in body
        else:  # the messages the judge fitted: rendered by the same template, they are exactly those ids
            body = next(b for b in sent.values() if ref.encoder.encode(b["messages"]) == ids)
            assert "prompt" not in body
        assert (body["temperature"], body["max_tokens"]) == (0.0, judge.max_new_tokens)
        assert grade.context_cut_by_tokens == cut
        assert (grade.level, grade.raw, grade.status) == (standin.level_for(body), f" {standin.level_for(body)}", "ok")
    assert any(g.context_cut_by_tokens for g in grades), "the long document must be cut to fit max_model_len"
    judge.backend.close()


@pytest.mark.parametrize("shape", ["completions", "chat"])
def test_distribution_mode_reads_each_digits_logprob_token_ids(standin, tokenizer, shape):
    judge = judge_on(standin, tokenizer, shape=shape, mode="distribution")
    grades = judge.grade(PAIRS)
    sent = bodies(standin)
    assert all(b["logprob_token_ids"] == judge.digit_ids and b["max_tokens"] == 1 for b in sent)
    by_fingerprint = {fingerprint(b): b for b in sent}
    ref = reference(judge.config, tokenizer)
    for pair, grade in zip(PAIRS, grades):
        payload = ref.encode_pair(pair)[0]
        body = (
            by_fingerprint[sum(payload)]
            if shape == "completions"
            else next(b for b in sent if ref.encoder.encode(b["messages"]) == payload)
        )
        probs, level, expected = distribution(standin.digit_logprobs(body), list(range(6)))
        assert grade.probs == pytest.approx(probs) and grade.level == level and grade.status == "ok"
        assert grade.expected == pytest.approx(expected)
    assert len({round(g.expected, 6) for g in grades}) > 1
    judge.backend.close()


@pytest.mark.parametrize("shape", ["completions", "chat"])
def test_top_logprobs_counts_a_digit_outside_the_top_k_as_zero(standin, tokenizer, shape):
    judge = judge_on(
        standin, tokenizer, shape=shape, mode="distribution", digit_logprobs="top_logprobs", top_logprobs=4
    )
    grades = judge.grade(PAIRS)
    assert all("logprob_token_ids" not in b and 4 in (b.get("top_logprobs"), b["logprobs"]) for b in bodies(standin))
    for grade in grades:
        listed = sum(p > 0 for p in grade.probs)
        assert 1 <= listed <= 4 and 0 in grade.probs and sum(grade.probs) == pytest.approx(1)
    judge.backend.close()


def test_the_probe_refuses_distribution_mode_without_digit_logprobs(tokenizer):
    server = StandIn(logprob_token_ids=False)  # a server that ignores vLLM's logprob_token_ids
    try:
        with pytest.raises(ServerError, match="distribution mode needs the digits' log-probabilities") as caught:
            judge_on(server, tokenizer, mode="distribution")
        assert "\n" not in str(caught.value)
        assert len(bodies(server)) == 0, "only the probe was sent"
        judge = judge_on(server, tokenizer, mode="distribution", digit_logprobs="top_logprobs")
        assert all(g.status == "ok" for g in judge.grade(PAIRS[:2]))
        judge.backend.close()
    finally:
        server.close()


def is_pair(tokenizer, cfg, pair):
    ids = reference(cfg, tokenizer).encode_pair(pair)[0]
    return lambda body: body.get("prompt") == ids


def test_429_is_retried_after_the_servers_retry_after(standin, tokenizer):
    cfg = config(standin.endpoint)
    standin.fail(is_pair(tokenizer, cfg, PAIRS[1]), Fault(429, headers=(("Retry-After", "1"),)))
    judge = make_judge(cfg, tokenizer)
    grades = judge.grade(PAIRS)
    assert [g.status for g in grades] == ["ok"] * len(PAIRS)
    target = reference(cfg, tokenizer).encode_pair(PAIRS[1])[0]
    arrivals = [t for t, _, body in standin.received if body.get("prompt") == target]
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 1.0, "waited the Retry-After, not the 0.01 s backoff"
    judge.backend.close()


def test_500_and_garbage_are_retried_then_only_that_pair_fails(standin, tokenizer):
    cfg = config(standin.endpoint, max_retries=2)
    standin.fail(is_pair(tokenizer, cfg, PAIRS[0]), *[Fault(500)] * 3)
    standin.fail(is_pair(tokenizer, cfg, PAIRS[3]), Fault(200, body="{not json"), Fault(502, body="Bad Gateway"))
    judge = make_judge(cfg, tokenizer)
    grades = judge.grade(PAIRS)
    assert grades[0].status == "request_failed" and grades[0].level is None
    assert "HTTP 500" in grades[0].raw and "the stand-in failed on purpose" in grades[0].raw
    assert "3 attempts" in grades[0].raw and "127.0.0.1" not in grades[0].raw, "raw is published: no endpoint"
    assert [g.status for g in grades[1:]] == ["ok"] * (len(PAIRS) - 1), "garbage then 502 then an answer: ok"
    judge.backend.close()


def test_a_client_error_is_not_retried(standin, tokenizer):
    cfg = config(standin.endpoint)
    standin.fail(is_pair(tokenizer, cfg, PAIRS[2]), Fault(400, body='{"error": {"message": "prompt too long"}}'))
    judge = make_judge(cfg, tokenizer)
    grades = judge.grade(PAIRS)
    assert grades[2].status == "request_failed" and "HTTP 400: prompt too long" in grades[2].raw
    assert len(bodies(standin)) == len(PAIRS)
    judge.backend.close()


def test_a_timeout_is_retried_then_that_pair_fails(standin, tokenizer):
    cfg = config(standin.endpoint, request_timeout_s=0.3, max_retries=1)
    standin.fail(is_pair(tokenizer, cfg, PAIRS[4]), *[Fault(200, delay=1.0)] * 2)
    standin.fail(is_pair(tokenizer, cfg, PAIRS[5]), Fault(200, delay=1.0))
    judge = make_judge(cfg, tokenizer)
    grades = judge.grade(PAIRS)
    assert grades[4].status == "request_failed" and "no answer within 0.3 s" in grades[4].raw
    assert grades[5].status == "ok", "one timeout, then an answer"
    judge.backend.close()


def test_a_dead_port_is_one_line_before_any_pair(tokenizer):
    server = StandIn()
    server.close()  # nothing listens there now
    with pytest.raises(ServerError, match="cannot reach the server") as caught:
        make_judge(config(server.endpoint), tokenizer)
    assert "\n" not in str(caught.value)


def test_wrong_url_or_model_is_one_line(standin, tokenizer):
    with pytest.raises(ServerError, match="not an OpenAI model list: is the endpoint the API base"):
        make_judge(config(standin.endpoint.replace("/v1", "/v2")), tokenizer)
    with pytest.raises(ServerError, match=r"does not serve the model 'elsewhere' \(it serves: standin-judge\)"):
        make_judge(config(standin.endpoint, served_model="elsewhere"), tokenizer)
    assert bodies(standin) == [], "no request was sent"


def test_the_api_key_comes_from_the_named_variable_and_is_never_shown(tokenizer, monkeypatch):
    server = StandIn(api_key="sk-right-0123")
    try:
        monkeypatch.delenv(KEY_ENV, raising=False)
        with pytest.raises(ServerError, match=f"api_key_env names {KEY_ENV}, which is not set"):
            make_judge(config(server.endpoint, api_key_env=KEY_ENV), tokenizer)
        monkeypatch.setenv(KEY_ENV, "sk-wrong-4567")
        with pytest.raises(ServerError, match=f"refused the API key from \\${KEY_ENV}: HTTP 401") as caught:
            make_judge(config(server.endpoint, api_key_env=KEY_ENV), tokenizer)
        assert "sk-wrong-4567" not in str(caught.value) and "***" in str(caught.value), "the server quoted the key"
        with pytest.raises(ServerError, match="refused a request without an API key"):
            make_judge(config(server.endpoint), tokenizer)
        monkeypatch.setenv(KEY_ENV, "sk-right-0123")
        judge = make_judge(config(server.endpoint, api_key_env=KEY_ENV), tokenizer)
        grades = judge.grade(PAIRS)
        assert [g.status for g in grades] == ["ok"] * len(PAIRS)
        assert "sk-right" not in judge.description and "sk-right" not in repr(judge.config)
        judge.backend.close()
    finally:
        server.close()


def test_a_server_that_dies_mid_run_stops_the_call_with_one_line(standin, tokenizer):
    pairs = [Pair(f"question {i}?", DOCUMENTS[i % 2]) for i in range(40)]
    judge = make_judge(config(standin.endpoint, concurrency=2, max_retries=1), tokenizer)
    standin.answer_limit = standin.answers() + 5
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="the server stopped answering") as caught:
        judge.grade(pairs)
    assert "\n" not in str(caught.value) and time.monotonic() - started < 20
    assert standin.answers() < len(pairs), "the rest were not sent once the server was gone"
    judge.backend.close()


def test_retry_after_takes_seconds_or_an_http_date():
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 120))
    assert 100 < retry_after_seconds(later) <= 120


def test_r3a_hands_both_rounds_over_as_messages(standin, tokenizer):
    cfg = config(standin.endpoint, shape="chat").model_copy(
        update={"prompt": "r3a", "max_new_tokens": 8, "max_model_len": 1024}
    )
    judge = make_judge(cfg, tokenizer)
    pairs = [Pair(QUESTIONS[0], d, (DOCUMENTS[0], DOCUMENTS[1])) for d in DOCUMENTS[:2]]
    grades = judge.grade(pairs)
    sent = bodies(standin)
    first = [b for b in sent if b["messages"][-1]["content"].startswith("Please determine the primary intent")]
    second = [b for b in sent if len(b["messages"]) > 2]
    assert len(first) == 1 and len(second) == len(pairs), "one intent round for the question, then one per pair"
    intent = f" {standin.level_for(first[0])}"
    assert all(
        b["messages"][1:3] == [first[0]["messages"][1], {"role": "assistant", "content": intent}] for b in second
    )
    assert [g.status for g in grades] == ["no_digit"] * len(pairs), "the stand-in answers no <think>/<score>"
    judge.backend.close()


@pytest.mark.parametrize("export", [False, True])
def test_plain_text_prompts_are_not_sent_as_messages(standin, tokenizer, export):
    plain = config(standin.endpoint, shape="chat").model_copy(update={"chat_template": False})
    with pytest.raises(ServerError, match="chat_template is false .* judge.openai.request_shape: completions"):
        export_judge(plain, tokenizer) if export else make_judge(plain, tokenizer)
    assert not [path for _, path, _ in standin.received if path != "/v1/models"], "refused before any request"


def test_a_documents_other_sub_questions_are_sent_once_its_first_is_answered(standin, tokenizer):
    """Under the document-first prompt each document's pairs are a group: the rest of a group goes to the server
    only after its first request's answer came back (its document then sits in the server's prefix cache), while the
    first requests of other groups run alongside, within the concurrency."""
    standin.answer_delay = 0.05
    cfg = config(standin.endpoint, mode="distribution", concurrency=4).model_copy(
        update={"prompt": "crux-paper-document-first"}
    )
    judge = make_judge(cfg, tokenizer)
    assert judge.groups_documents
    pairs = [Pair(q, d) for d in DOCUMENTS for q in [*QUESTIONS, "What harms wild bees?"]]
    grades = judge.grade(pairs)
    assert [g.status for g in grades] == ["ok"] * len(pairs)
    ref = reference(judge.config, tokenizer)
    group_of = {sum(ref.encode_pair(p)[0]): p.document for p in pairs}
    sent = [(t, fingerprint(b)) for t, path, b in standin.received if path != "/v1/models"]
    arrived = [(t, group_of[f]) for t, f in sent if f in group_of]  # the start-up probe's are not pairs
    assert len(arrived) == len(pairs)
    answered = [(t, group_of[f]) for t, f in standin.answered if f in group_of]
    for document in DOCUMENTS:
        times = [t for t, d in arrived if d == document]
        first_answer = min(t for t, d in answered if d == document)
        assert len(times) == 3 and all(t >= first_answer for t in sorted(times)[1:])
    firsts = sorted(min(t for t, d in arrived if d == doc) for doc in DOCUMENTS)
    assert firsts[-1] - firsts[0] < 0.05, "the groups' first requests went out together"
    judge.backend.close()
