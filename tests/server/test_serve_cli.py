"""`cag serve`'s refusals before it serves: one line, exit code 1, nothing loaded for nothing."""

import socket

from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, ["serve", *map(str, args)], env={"COLUMNS": "200"})


def test_a_port_in_use_a_missing_store_and_a_short_key_are_one_line_errors(tmp_path, served_store):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = invoke("--store", served_store, "--port", port)
    assert busy.exit_code == 1 and f"Cannot listen on 127.0.0.1:{port}" in busy.output
    missing = invoke("--store", tmp_path / "nothing", "--port", 0)
    assert missing.exit_code == 1 and "No cag store at" in missing.output
    short = invoke("--store", served_store, "--api-key", "abc")
    assert short.exit_code == 1 and "--api-key is too short" in short.output
    outside = invoke("--store", served_store, "--ingest-root", tmp_path / "absent")
    assert outside.exit_code == 1 and "is not a folder" in outside.output
    for result in (busy, missing, short, outside):
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
