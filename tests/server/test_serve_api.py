"""/v1/ask (JSON and streamed), /v1/models, /v1/health, /metrics, and the error table: every
refusal is a 4xx with a one-line JSON error, and the server keeps serving."""

import json

import pytest

from cag.ask import ask
from cag.models import load_model
from cag.retrieval import Retriever
from cag.store import Store

QUESTION = "How long can the European lobster grow?"


def test_ask_answers_as_cag_ask_json_does(client, tiny_models, served_store):
    body = {"question": QUESTION, "model": tiny_models["generator"], "mode": "native", "top_k": 2, "max_new_tokens": 6}
    reply = client.post("/v1/ask", json=body)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert set(data) == {"answer", "mode", "model", "sources", "context_tokens", "timings_ms", "notes"}
    assert data["mode"] == "native" and data["model"] == tiny_models["generator"] and len(data["sources"]) == 2
    assert {"ttft", "warmup", "queue", "prefill"} <= set(data["timings_ms"])
    # the same answer as in process, with the same model and store
    store = Store.open(served_store)
    local = ask(QUESTION, model=tiny_models["generator"], top_k=2, mode="native", max_new_tokens=6,
                lm=load_model(tiny_models["generator"]), retriever=Retriever(store))
    store.close()
    assert data["answer"] == local.answer and data["context_tokens"] == local.context_tokens
    assert [s["doc"] for s in data["sources"]] == [s.doc for s in local.sources]
    # defaults as `cag ask`: the first served model, mode auto (native here: the generator's own caches)
    default = client.post("/v1/ask", json={"question": QUESTION, "max_new_tokens": 2}).json()
    assert default["model"] == tiny_models["generator"] and default["mode"] == "native"
    assert len(default["sources"]) == 3 and default["notes"][0].startswith("mode auto")


def test_streamed_tokens_add_up_to_the_answer(client, sse_events):
    body = {"question": QUESTION, "mode": "direct", "max_new_tokens": 8, "stream": True}
    with client.stream("POST", "/v1/ask", json=body) as reply:
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
        text = reply.read().decode()
    found = sse_events(text)
    tokens = [data["text"] for kind, data in found if kind == "token"]
    kind, result = found[-1]
    assert kind == "result" and tokens and "".join(tokens).strip() == result["answer"]  # every piece sent
    assert result["mode"] == "direct" and result["timings_ms"]["ttft"] > 0


def test_models_health_and_metrics(client, tiny_models):
    client.post("/v1/ask", json={"question": QUESTION, "mode": "native", "max_new_tokens": 2})
    client.post("/v1/ask", json={"question": QUESTION, "model": "nobody"})
    models = client.get("/v1/models").json()
    assert models["object"] == "list"
    by_id = {m["id"]: m for m in models["data"]}
    assert by_id[tiny_models["generator"]]["role"] == "generator" and by_id[tiny_models["generator"]]["loaded"]
    assert by_id[tiny_models["encoder"]]["role"] == "encoder"
    health = client.get("/v1/health").json()
    assert health["status"] == "ok" and tiny_models["generator"] in health["loaded"]
    text = client.get("/metrics").text
    generator = tiny_models["generator"]
    assert 'cag_requests_total{endpoint="/v1/ask",status="200"}' in text
    assert 'cag_request_errors_total{endpoint="/v1/ask",status="404"}' in text
    assert f'cag_ttft_seconds_bucket{{le="0.01",mode="native",model="{generator}"}}' in text
    assert f'cag_queue_seconds_count{{mode="native",model="{generator}"}}' in text


@pytest.mark.parametrize("send, status, words", [
    (dict(content=b'{"question": "x",', headers={"content-type": "application/json"}), 400, "Malformed JSON"),
    (dict(json={"question": QUESTION, "model": "gpt-9"}), 404, "Unknown model 'gpt-9'"),
    (dict(json={"question": QUESTION, "mode": "telepathy"}), 400, "Unknown mode 'telepathy'"),
    (dict(json={"question": "  "}), 400, "The question is empty"),
    (dict(json={"question": QUESTION, "top_k": 0}), 422, "top_k"),
    (dict(json={"question": QUESTION, "top_k": 65}), 400, "over this server's limit of 64"),
    (dict(json={"question": QUESTION, "max_new_tokens": 65}), 400, "max_new_tokens must be 1-64"),
    (dict(json={"questoin": QUESTION}), 422, "questoin: Extra inputs are not permitted"),
    (dict(json={"question": "lobster " * 3000, "mode": "direct"}), 400, "at most 4,096"),
    (dict(content=b"x" * (65 * 1024), headers={"content-type": "application/json"}), 413, "over this server's limit"),
])
def test_bad_requests_are_4xx_with_a_one_line_error(client, send, status, words):
    reply = client.post("/v1/ask", **send)
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert set(body) == {"error"} and words in body["error"] and "\n" not in body["error"]
    assert client.post("/v1/ask", json={"question": QUESTION, "max_new_tokens": 1}).status_code == 200


def test_unknown_paths_methods_and_a_streamed_refusal(client):
    assert client.get("/v1/nothing").json() == {"error": "Not found: /v1/nothing"}
    assert client.get("/v1/ask").status_code == 405
    # a stream refused before its first token is a plain 4xx, not an event stream
    reply = client.post("/v1/ask", json={"question": "lobster " * 3000, "mode": "direct", "stream": True})
    assert reply.status_code == 400 and "at most 4,096" in reply.json()["error"]


def test_an_internal_error_is_a_500_in_one_line_and_the_server_goes_on(client, monkeypatch):
    import cag.server.service as service

    def broken(*args, **kwargs):
        raise RuntimeError("secret internals\nsecond line")

    monkeypatch.setattr(service, "ask", broken)
    reply = client.post("/v1/ask", json={"question": QUESTION})
    assert reply.status_code == 500
    assert reply.json() == {"error": "Internal error (RuntimeError); the server log has the details."}
    monkeypatch.undo()
    assert client.post("/v1/ask", json={"question": QUESTION, "max_new_tokens": 1}).status_code == 200


def test_ask_recomputes_the_share_it_names(client, tiny_models):
    """/v1/ask's `blend` reaches the blend mode: every token of one retrieved chunk recomputed is the
    generator's own cache of it, so the answer of reading it as text."""
    body = {"question": QUESTION, "model": tiny_models["generator"], "top_k": 1, "max_new_tokens": 8}
    answer = lambda **extra: client.post("/v1/ask", json={**body, **extra}).json()  # noqa: E731
    translated, direct = answer(mode="translated"), answer(mode="direct")
    assert translated["answer"] != direct["answer"]  # the tiny translator is random: its cache reads badly
    every = answer(mode="translated-blend", blend=1.0)
    assert every["mode"] == "translated-blend" and every["answer"] == direct["answer"]
    assert answer(mode="translated-blend", blend=0.0)["answer"] == translated["answer"]
    chat = client.post("/v1/chat/completions", json={"model": tiny_models["generator"], "max_tokens": 8,
                                                     "messages": [{"role": "user", "content": QUESTION}],
                                                     "cag": {"mode": "translated-blend", "top_k": 1, "blend": 1.0}})
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] == direct["answer"]
    reply = client.post("/v1/ask", json={**body, "blend": 2})
    assert reply.status_code == 422 and "blend" in reply.json()["error"]


@pytest.mark.parametrize("headers", [{"content-type": "application/x-www-form-urlencoded"},  # what curl -d sends
                                     {"content-type": "text/plain"}, {}])
def test_a_json_body_sent_without_the_json_content_type_is_refused_naming_the_header(client, headers):
    body = json.dumps({"question": QUESTION, "max_new_tokens": 1}).encode()
    reply = client.post("/v1/ask", content=body, headers=headers)
    assert reply.status_code == 415, reply.text
    error = reply.json()["error"]
    assert "Content-Type: application/json" in error and "-H 'Content-Type: application/json'" in error
    assert "\n" not in error
    sent = client.post("/v1/ask", content=body, headers={"content-type": "application/json"})
    assert sent.status_code == 200, sent.text


def test_the_curl_examples_in_the_docs_send_json():
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "serving.md").read_text()
    posts = [line for line in docs.splitlines() if line.startswith("curl") and " -d " in line]
    assert posts and all("-H 'Content-Type: application/json'" in line for line in posts), posts


def _metric(text: str, name: str) -> float:
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


def test_a_hot_chunk_is_served_from_the_memory_tier(client):
    ask = {"question": QUESTION, "mode": "native", "max_new_tokens": 2, "top_k": 2}
    first = client.post("/v1/ask", json=ask).json()
    before = client.get("/metrics").text
    second = client.post("/v1/ask", json=ask).json()
    after = client.get("/metrics").text
    assert second["answer"] == first["answer"] and len(second["sources"]) == 2
    # both chunks from memory: no disk read, no checksum, no decode
    assert _metric(after, "cag_memory_tier_hits_total") - _metric(before, "cag_memory_tier_hits_total") == 2
    assert _metric(after, "cag_memory_tier_misses_total") == _metric(before, "cag_memory_tier_misses_total")
    assert 0 < _metric(after, "cag_memory_tier_bytes") <= _metric(after, "cag_memory_tier_max_bytes") == 1024 * 2**20
