"""Conversations whose history is chunk caches: turns by two models, the history read natively by
the memory model, translated for another, or as text; session ids that cannot name other folders."""

import json

from cag.store import Store


def turn(client, sid, message, **extra):
    reply = client.post(f"/v1/sessions/{sid}/turns", json={"message": message, "max_new_tokens": 4, **extra})
    assert reply.status_code == 200, reply.text
    return reply.json()


def cache_spaces(served_store, sid):
    """role -> cache files in the session store."""
    found = {}
    for model_json in (served_store / "sessions" / sid / "caches").glob("*/model.json"):
        role = json.loads(model_json.read_text())["role"]
        found[role] = len(list(model_json.parent.glob("*/*.safetensors")))
    return found


def test_a_history_moves_between_models(client, tiny_models, served_store):
    generator, encoder = tiny_models["generator"], tiny_models["encoder"]
    created = client.post("/v1/sessions")
    assert created.status_code == 201
    sid = created.json()["id"]
    assert created.json()["memory_model"] == encoder  # default: the store's encoder

    first = turn(client, sid, "Where do lobsters live?")
    assert first["turn"] == 1 and first["model"] == generator and first["history"]["mode"] == "none"
    assert [(r["n"], r["role"], r["author"]) for r in first["records"]] == [(1, "user", "user"), (2, "assistant", generator)]

    second = turn(client, sid, "How long do they grow?")  # another model than the memory: translated
    history = second["history"]
    assert history["mode"] == "translated" and history["translated"] and history["memory_model"] == encoder
    assert [(p["n"], p["author"], p["read_as"]) for p in history["parts"]] == [(1, "user", "translated"),
                                                                               (2, generator, "translated")]
    read = [p["chunks"] for p in history["parts"]]
    assert min(read) >= 1 and history["chunks"] == sum(read) and history["tokens"] > 0
    assert second["timings_ms"]["translate"] > 0
    spaces = cache_spaces(served_store, sid)
    assert set(spaces) == {"encoder", "translated"} and spaces["translated"] == history["chunks"]  # kept for reuse

    third = turn(client, sid, "And their colour?", model=encoder)  # the memory model itself: native
    assert third["history"]["mode"] == "native" and not third["history"]["translated"]
    assert [p["author"] for p in third["history"]["parts"]] == ["user", generator, "user", generator]

    fourth = turn(client, sid, "Anything else?", history_mode="direct")  # the comparison: as text
    assert fourth["history"]["mode"] == "direct" and fourth["history"]["records"] == 6
    assert fourth["history"]["chunks"] == sum(p["chunks"] for p in fourth["history"]["parts"])

    fifth = turn(client, sid, "Thanks.")  # translated again: the older records' translations reused
    assert fifth["history"]["mode"] == "translated" and fifth["history"]["records"] == 8
    store = Store.open(served_store / "sessions" / sid)
    turns = str((served_store / "sessions" / sid / "turns.jsonl").resolve())
    read = {c.text_sha256 for n in range(1, 9) for c in store.catalog.chunks_of(turns, f"L{n}")}
    texts = store.catalog.text_hashes()  # identical records (a repeated reply) are cached once
    store.close()
    spaces = cache_spaces(served_store, sid)
    # translated: what the fifth turn read (records 1-8), not the two newest unless their text repeats
    assert len(read) < len(texts) and spaces["translated"] == len(read) and spaces["encoder"] == len(texts)

    peek = turn(client, sid, "Just asking.", remember=False)  # read the history, add nothing to it
    assert peek["turn"] == 6 and peek["records"] == [] and peek["history"]["records"] == 10
    session = client.get(f"/v1/sessions/{sid}").json()
    assert [r["n"] for r in session["records"]] == list(range(1, 11))
    assert [r["author"] for r in session["records"]][4:6] == ["user", encoder]
    assert session["records"][0]["text"] == "user: Where do lobsters live?"


def test_the_memory_models_own_history_is_read_as_exactly_as_its_text(client, tiny_models):
    """A one-record history prefilled by the memory model, placed natively, gives the answer the
    model gives reading the same record as text."""
    encoder = tiny_models["encoder"]
    replies = {}
    for mode in ("native", "direct"):
        sid = client.post("/v1/sessions", json={"memory_model": encoder}).json()["id"]
        added = client.post(f"/v1/sessions/{sid}/records",
                            json={"author": "agent-a", "content": "Lobsters grow to 60 cm."})
        assert added.status_code == 201 and added.json()["records"][0]["text"].startswith("agent-a: ")
        answer = turn(client, sid, "How long does it grow?", model=encoder, history_mode=mode, max_new_tokens=8)
        assert answer["history"]["mode"] == mode and answer["history"]["parts"][0]["role"] == "note"
        assert answer["history"]["chunks"] == 1  # one chunk: its cache holds all the attention there is
        replies[mode] = answer["reply"]
    assert replies["native"] == replies["direct"]


def test_a_streamed_turn(client, sse_events):
    sid = client.post("/v1/sessions").json()["id"]
    turn(client, sid, "Hello.")
    with client.stream("POST", f"/v1/sessions/{sid}/turns",
                       json={"message": "Go on.", "max_new_tokens": 5, "stream": True}) as reply:
        found = sse_events(reply.read().decode())
    kind, result = found[-1]
    assert kind == "result" and result["turn"] == 2 and result["history"]["mode"] == "translated"
    assert "".join(d["text"] for k, d in found if k == "token").strip() == result["reply"]


def test_bad_session_requests(client, tiny_models, served_store):
    sid = client.post("/v1/sessions").json()["id"]
    before = sorted(p.name for p in (served_store / "sessions").iterdir())
    for bad in ("0" * 32, "...", sid.upper(), sid + "0", "x" * 32, "%2e%2e%2e"):
        reply = client.post(f"/v1/sessions/{bad}/turns", json={"message": "hi"})
        assert reply.status_code == 404 and "No session" in reply.json()["error"], bad
    for bad in ("..", "%2e%2e%2fstore", "..%2f..%2fx"):  # folded into other paths: no route takes them
        reply = client.post(f"/v1/sessions/{bad}/turns", json={"message": "hi"})
        assert reply.status_code == 404 and "Not found" in reply.json()["error"], bad
    assert sorted(p.name for p in (served_store / "sessions").iterdir()) == before
    for body, status, words in (
            ({"message": "hi", "history_mode": "native"}, 400, "needs the turn's model to be the session's memory model"),
            ({"message": "hi", "history_mode": "psychic"}, 400, "Unknown mode 'psychic'"),
            ({"message": "hi", "model": "gpt-9"}, 404, "Unknown model"),
            ({"message": " "}, 400, "The message is empty")):
        if body.get("history_mode") == "native":
            turn(client, sid, "A first turn, so that there is a history.")
        reply = client.post(f"/v1/sessions/{sid}/turns", json=body)
        assert reply.status_code == status and words in reply.json()["error"], reply.text
    assert client.post("/v1/sessions", json={"memory_model": "gpt-9"}).status_code == 404
    for record, words in (({"author": "a:b", "content": "x"}, "without ':'"),
                          ({"author": "a", "content": "x", "role": "system"}, "Unknown role")):
        reply = client.post(f"/v1/sessions/{sid}/records", json=record)
        assert reply.status_code == 400 and words in reply.json()["error"]


def test_a_turn_recomputes_the_share_of_the_history_it_names(client, tiny_models):
    """translated-blend with `blend` 0 reads the translation as it is; with 1 the turn's model
    recomputes every history token: its own cache of a one-chunk history, so the reply of reading
    the record as text."""
    sid = client.post("/v1/sessions").json()["id"]  # memory model: the encoder; turns by the generator
    client.post(f"/v1/sessions/{sid}/records", json={"author": "agent-a", "content": "Lobsters grow to 60 cm."})
    ask = lambda mode, **extra: turn(client, sid, "How long?", history_mode=mode, max_new_tokens=8,  # noqa: E731
                                     remember=False, **extra)
    translated, direct = ask("translated"), ask("direct")
    assert translated["history"]["chunks"] == 1 and translated["reply"] != direct["reply"]  # the random translator
    none = ask("translated-blend", blend=0.0)
    every = ask("translated-blend", blend=1.0)
    assert none["history"]["mode"] == every["history"]["mode"] == "translated-blend"
    assert none["reply"] == translated["reply"] and every["reply"] == direct["reply"]
    assert "blend" in every["timings_ms"]  # the turn chose nothing: at 1.0 every token is recomputed
    for share in (-0.1, 1.5):
        reply = client.post(f"/v1/sessions/{sid}/turns", json={"message": "x", "history_mode": "translated-blend",
                                                               "blend": share})
        assert reply.status_code == 422 and "blend" in reply.json()["error"], reply.text
