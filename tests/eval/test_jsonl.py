"""JSON Lines read plain or gzip-compressed, and gzip files written byte-identically."""

import gzip
import json

import pytest

from eval.jsonl import read_records, read_text, resolve, write_gz


def test_a_plain_name_reads_its_gzip_twin_and_the_other_way_round(tmp_path):
    rows = [{"id": "a", "score": 1.0}, {"id": "b", "score": 0.5}]
    text = "".join(json.dumps(r) + "\n" for r in rows) + "\n"  # a blank line is no record
    write_gz(tmp_path / "predictions.jsonl.gz", text)
    (tmp_path / "other.jsonl").write_text(text)
    assert resolve(tmp_path / "predictions.jsonl") == tmp_path / "predictions.jsonl.gz"
    assert read_records(tmp_path / "predictions.jsonl") == rows
    assert read_records(tmp_path / "other.jsonl.gz") == rows  # only the plain one exists
    assert read_text(tmp_path / "predictions.jsonl.gz") == text
    assert gzip.decompress((tmp_path / "predictions.jsonl.gz").read_bytes()).decode() == text


def test_a_file_present_in_both_forms_reads_the_one_named_and_a_missing_one_names_itself(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"form": "plain"}\n')
    write_gz(tmp_path / "p.jsonl.gz", '{"form": "gzip"}\n')
    assert read_records(tmp_path / "p.jsonl") == [{"form": "plain"}]
    assert read_records(tmp_path / "p.jsonl.gz") == [{"form": "gzip"}]
    assert resolve(tmp_path / "none.jsonl") == tmp_path / "none.jsonl"
    with pytest.raises(FileNotFoundError, match="none.jsonl"):
        read_text(tmp_path / "none.jsonl")


def test_the_same_text_gives_the_same_gzip_bytes_whenever_written(tmp_path):
    write_gz(tmp_path / "a.jsonl.gz", '{"x": 1}\n')
    write_gz(tmp_path / "b.jsonl.gz", '{"x": 1}\n')
    first = (tmp_path / "a.jsonl.gz").read_bytes()
    assert first == (tmp_path / "b.jsonl.gz").read_bytes()
    assert first[4:8] == b"\0\0\0\0"  # the header's mtime
    with pytest.raises(ValueError, match="ends in .gz"):
        write_gz(tmp_path / "c.jsonl", "")
