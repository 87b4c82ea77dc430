"""/v1/ingest: paths under the configured roots only (no `..`, no link leading out), uploaded text
saved inside the store; what is ingested is answered from at once."""

import os
import shutil

import httpx
import pytest

from cag.server.config import ServeConfig


@pytest.fixture(scope="module")
def ingesting(served_store, tiny_models, start_server, tmp_path_factory):
    """A server of its own (on a copy of the store: the other tests' retrieval stays as it was)."""
    root = tmp_path_factory.mktemp("ingest")
    store = shutil.copytree(served_store, root / "store", ignore=shutil.ignore_patterns("sessions"))
    allowed = root / "allowed"
    (allowed / "sub").mkdir(parents=True)
    (root / "secret.txt").write_text("The launch code is 0000.")
    server = start_server(ServeConfig(store=store, port=0, models=(tiny_models["generator"],),
                                      ingest_roots=(str(allowed),)))
    server.root, server.allowed, server.store = root, allowed, store
    return server


def post(server, body):
    return httpx.post(f"{server.url}/v1/ingest", json=body, timeout=60)


def sources(server, question):
    reply = httpx.post(f"{server.url}/v1/ask", json={"question": question, "top_k": 1, "max_new_tokens": 1}, timeout=60)
    assert reply.status_code == 200, reply.text
    return [s["doc"] for s in reply.json()["sources"]]


def test_a_path_under_a_root_is_ingested_and_answered_from(ingesting):
    (ingesting.allowed / "sub" / "comet.txt").write_text("The Zorblax comet returns every 77 years. " * 3)
    report = post(ingesting, {"paths": ["sub"]})
    assert report.status_code == 200, report.text
    data = report.json()
    assert data["files_ingested"] == 1 and data["chunks_new"] >= 1 and data["caches_written"] >= 1
    assert sources(ingesting, "When does the Zorblax comet return?") == [str(ingesting.allowed / "sub" / "comet.txt")]
    again = post(ingesting, {"paths": [str(ingesting.allowed / "sub" / "comet.txt")]}).json()  # absolute, unchanged
    assert again["files_unchanged"] == 1 and again["caches_written"] == 0


def test_uploaded_text_is_saved_in_the_store_and_answered_from(ingesting):
    report = post(ingesting, {"documents": [{"name": "quasar-notes.md", "text": "Quasar Q-17 shines in violet. " * 3}]})
    assert report.status_code == 200 and report.json()["files_ingested"] == 1
    saved = ingesting.store / "uploads" / "quasar-notes.md"
    assert saved.read_text().startswith("Quasar Q-17")
    assert sources(ingesting, "What colour does quasar Q-17 shine in?") == [str(saved)]


def test_nothing_outside_the_roots_is_read_and_nothing_outside_the_store_written(ingesting):
    secret = ingesting.root / "secret.txt"
    os.symlink(secret, ingesting.allowed / "link.txt")
    (ingesting.allowed / "leaky").mkdir()
    os.symlink(secret, ingesting.allowed / "leaky" / "inside.txt")
    before = sorted(p.name for p in ingesting.root.iterdir())
    for body, status, words in (
            ({"paths": ["../secret.txt"]}, 403, "contains '..'"),
            ({"paths": ["sub/../../secret.txt"]}, 403, "contains '..'"),
            ({"paths": [str(secret)]}, 403, "outside the ingest roots"),
            ({"paths": ["/etc/hostname"]}, 403, "outside the ingest roots"),
            ({"paths": ["link.txt"]}, 403, "outside the ingest roots"),
            ({"paths": ["leaky"]}, 403, "links outside the ingest roots"),
            ({"paths": ["missing.txt"]}, 404, "No such file"),
            ({"documents": [{"name": "../../escape.txt", "text": "x"}]}, 400, "not a plain file name"),
            ({"documents": [{"name": ".hidden.txt", "text": "x"}]}, 400, "not a plain file name"),
            ({"documents": [{"name": "run.sh", "text": "x"}]}, 400, "needs a text suffix"),
            ({}, 400, "Nothing to ingest"),
            ({"paths": "secret.txt"}, 422, "Invalid request")):
        reply = post(ingesting, body)
        assert reply.status_code == status and words in reply.json()["error"], (body, reply.text)
    assert sorted(p.name for p in ingesting.root.iterdir()) == before  # no escape.txt anywhere
    assert "0000" not in httpx.post(f"{ingesting.url}/v1/ask", json={"question": "What is the launch code?",
                                                                     "top_k": 5, "mode": "direct"}, timeout=60).text


def test_without_roots_no_path_is_taken(tmp_path):
    from cag.server.errors import ForbiddenPathError
    from cag.server.paths import resolve_ingest_path

    (tmp_path / "a.txt").write_text("a")
    with pytest.raises(ForbiddenPathError, match="reads no paths"):
        resolve_ingest_path(str(tmp_path / "a.txt"), [])
    assert resolve_ingest_path("a.txt", [tmp_path]) == (tmp_path / "a.txt").resolve()


def test_a_server_ingest_leaves_nothing_for_store_check_to_report(ingesting):
    from cag.store.check import check_store

    report = post(ingesting, {"documents": [{"name": "nebula.md", "text": "The Crab Nebula is a supernova remnant. " * 3}]})
    assert report.status_code == 200 and report.json()["files_ingested"] == 1, report.text
    found = check_store(ingesting.store)
    assert found.problems == [], [p.message for p in found.problems]


def test_an_ingest_on_a_full_disk_is_a_507_in_one_line(ingesting, monkeypatch):
    import errno
    from pathlib import Path

    real = Path.write_bytes

    def full(path, data):
        if Path(path).is_relative_to(ingesting.store):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    report = post(ingesting, {"documents": [{"name": "full.md", "text": "The disk is full today. " * 3}]})
    assert report.status_code == 507, report.text
    error = report.json()["error"]
    assert "is full" in error and "\n" not in error
    monkeypatch.undo()
    assert not list(Path(ingesting.store).rglob(".tmp-*"))
    assert post(ingesting, {"documents": [{"name": "full.md", "text": "The disk is full today. " * 3}]}).status_code == 200
