"""The official `openai` client, unchanged, against the server on loopback: chat completions (whole
and streamed, cag's mode and sources in the `cag` extension field), models; and the API key."""

import httpx
import openai
import pytest

from cag.server.config import ServeConfig

QUESTION = "How tall is Mount Elbert?"


def client_for(live, key="unused"):
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0, timeout=60)


def test_chat_completion_through_the_openai_client(live, tiny_models):
    client = client_for(live)
    generator = tiny_models["generator"]
    completion = client.chat.completions.create(
        model=generator, max_tokens=5, extra_body={"cag": {"mode": "native", "top_k": 2}},
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}])
    choice = completion.choices[0]
    assert completion.object == "chat.completion" and completion.model == generator
    assert choice.message.role == "assistant" and choice.finish_reason in ("stop", "length")
    assert completion.usage.completion_tokens <= 5 and completion.usage.prompt_tokens > 0
    cag = completion.model_extra["cag"]
    assert cag["mode"] == "native" and len(cag["sources"]) == 2 and cag["timings_ms"]["ttft"] > 0
    assert any("not read" in note for note in cag["notes"])  # the system message, said so
    # the same answer /v1/ask gives
    same = httpx.post(f"{live.url}/v1/ask", json={"question": QUESTION, "mode": "native", "top_k": 2,
                                                  "max_new_tokens": 5}, timeout=60).json()
    assert choice.message.content == same["answer"]
    ids = [m.id for m in client.models.list()]
    assert generator in ids and tiny_models["encoder"] in ids


def test_streamed_chat_completion(live, tiny_models):
    client = client_for(live)
    stream = client.chat.completions.create(model=tiny_models["generator"], max_tokens=6, stream=True,
                                            messages=[{"role": "user", "content": QUESTION}])
    chunks = list(stream)
    pieces = [c.choices[0].delta.content or "" for c in chunks]
    assert chunks[0].choices[0].delta.role == "assistant"
    last = chunks[-1]
    assert last.choices[0].finish_reason in ("stop", "length")
    assert last.model_extra["cag"]["mode"] == "native" and last.usage.completion_tokens >= 1
    whole = client.chat.completions.create(model=tiny_models["generator"], max_tokens=6,
                                           messages=[{"role": "user", "content": QUESTION}])
    assert "".join(pieces).strip() == whole.choices[0].message.content


def test_openai_errors_come_through_as_client_exceptions(live):
    client = client_for(live)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    assert unknown.value.body.startswith("Unknown model 'gpt-4o'")  # cag's one-line error
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "system", "content": "hi"}])
    assert "no user message" in refused.value.body


@pytest.fixture(scope="module")
def keyed(served_store, tiny_models, start_server):
    return start_server(ServeConfig(store=served_store, port=0, models=(tiny_models["generator"],),
                                    api_key="s3cret-key-123"))


def test_api_key_guards_every_endpoint_but_health(keyed, tiny_models):
    assert httpx.get(f"{keyed.url}/v1/health").status_code == 200
    for method, path in (("GET", "/v1/models"), ("GET", "/metrics"), ("POST", "/v1/ask"), ("POST", "/v1/sessions"),
                         ("POST", "/v1/ingest"), ("GET", "/v1/nothing")):
        for headers in ({}, {"Authorization": "Bearer wrong-key-000"}, {"Authorization": "s3cret-key-123"}):
            reply = httpx.request(method, f"{keyed.url}{path}", headers=headers, json={})
            assert reply.status_code == 401 and "API key" in reply.json()["error"], (path, headers)
    with pytest.raises(openai.AuthenticationError):
        client_for(keyed, "wrong-key-000").models.list()
    completion = client_for(keyed, "s3cret-key-123").chat.completions.create(
        model=tiny_models["generator"], max_tokens=2, messages=[{"role": "user", "content": QUESTION}])
    assert completion.choices[0].message.content is not None
    assert 'endpoint="/v1/models",status="401"' in httpx.get(
        f"{keyed.url}/metrics", headers={"Authorization": "Bearer s3cret-key-123"}).text
