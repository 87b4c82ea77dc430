"""scripts/translators_extra.py: the translators that left translators/ come back from git history
(the commit whose bytes match the record's sha256) or, without that history, are trained again by
a `cag train` command that sets exactly the recorded config."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cag.models.fingerprint import sha256_hex

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("translators_extra", ROOT / "scripts" / "translators_extra.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_weights_come_back_from_the_commit_whose_bytes_match_the_record(tmp_path):
    """A repository where the translator was committed, replaced by a retrained one, then removed:
    the record names the first bytes, so their commit is found, not the newest one."""
    extra = _script()
    repo, path = tmp_path / "repo", Path("translators") / "a__b__ridge.safetensors"
    (repo / "translators").mkdir(parents=True)
    _git(repo, "init", "-q")
    first, second = b"first weights" * 1000, b"second weights" * 1000
    (repo / path).write_bytes(first)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "ship")
    shipped = _git(repo, "rev-parse", "HEAD")
    (repo / path).write_bytes(second)
    _git(repo, "commit", "-qam", "retrained")
    _git(repo, "rm", "-q", str(path))
    _git(repo, "commit", "-qm", "out of the tree")
    record = {"weights_sha256": sha256_hex(first)}
    assert extra.weights_from_history("a__b__ridge", record, repo) == (shipped, first)
    assert extra.weights_from_history("a__b__ridge", {"weights_sha256": sha256_hex(b"other")}, repo) is None
    # a shallow clone holds no removed file's history; a folder outside git none at all
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    assert extra.weights_from_history("a__b__ridge", record, shallow) is None
    assert extra.weights_from_history("a__b__ridge", record, tmp_path) is None


def test_a_restored_translator_is_installed_beside_its_record(tmp_path):
    extra = _script()
    records = tmp_path / "records"
    records.mkdir()
    (records / "a__b__ridge.json").write_text(json.dumps({"weights_sha256": "x"}))
    installed = extra.install("a__b__ridge", b"weights", records, tmp_path / "home")
    assert installed == tmp_path / "home" / "translators" / "a__b__ridge.safetensors"
    assert installed.read_bytes() == b"weights"
    assert (installed.parent / "a__b__ridge.json").read_bytes() == (records / "a__b__ridge.json").read_bytes()


def test_every_recorded_translator_has_its_weights_sha_and_training_config():
    extra = _script()
    names = extra.extra_names()
    assert set(names) == {f"smollm2-135m__{t}__{k}" for t in ("qwen2.5-coder-0.5b", "gemma3-270m")
                          for k in ("single", "ridge")} | {"qwen2.5-coder-0.5b__smollm2-135m__mot",
                                                           "qwen2.5-coder-0.5b__gemma3-270m__mot"}
    for name in names:
        record = extra.read_extra(name)
        assert len(record["weights_sha256"]) == 64 and record["spec"]["training"]["kind"] == name.split("__")[2]
        assert not (ROOT / "translators" / f"{name}.safetensors").exists()  # out of the tree


@pytest.mark.parametrize("name", _script().extra_names())
def test_the_retrain_command_sets_exactly_the_recorded_config(name, tmp_path, monkeypatch):
    """`cag train` parses the command into the recorded TrainConfig (older records' absent settings
    as off), without training: the training function is replaced by one that keeps the config."""
    import mot.training.train as training
    from cli.main import app
    from mot.training.config import ABSENT_MEANS, without_retired

    extra = _script()
    record = extra.read_extra(name)
    seen = []

    def keep_config(cfg, progress):
        seen.append(cfg)
        raise RuntimeError("not training")

    monkeypatch.setattr(training, "train", keep_config)
    args = extra.train_arguments(record, str(tmp_path / "out"))
    result = CliRunner().invoke(app, ["train", *args])
    assert isinstance(result.exception, RuntimeError) and len(seen) == 1, result.output
    got, recorded = seen[0].to_json(), {**ABSENT_MEANS, **without_retired(record["spec"]["training"], name)}
    settings = set(extra.DEFAULTS) - extra.NOT_SETTINGS - {"corpus", "heldout_corpus", "dtype"}
    assert {k: got[k] for k in settings} == {k: recorded[k] for k in settings}
    assert got["dtype"] == record["weights_dtype"]
    assert got["corpus"] == ["data/corpus/wikitext2/train_raw_part.jsonl"]
    assert got["heldout_corpus"] == ["data/corpus/wikitext2/valid.jsonl"]
    assert got["out"] == str(tmp_path / "out")


def test_a_config_the_command_cannot_express_is_refused():
    extra = _script()
    record = extra.read_extra("smollm2-135m__gemma3-270m__ridge")
    training = record["spec"]["training"]
    for change, message in (({"router_hidden": 64}, "cag train cannot set"),
                            ({"init": "runs/x/translator"}, "retrain that one first"),
                            ({"new_setting": 1}, "does not know"),
                            ({"corpus": ["/elsewhere/text.jsonl"]}, "not in this checkout's data/")):
        changed = {**record, "spec": {**record["spec"], "training": {**training, **change}}}
        with pytest.raises(SystemExit, match=message):
            extra.train_arguments(changed, "runs/x")
    from cag.errors import CagError
    removed = {**record, "spec": {**record["spec"], "training": {**training, "key_loss": "query"}}}
    with pytest.raises(CagError, match="key_loss='query', a setting this cag no longer has"):
        extra.train_arguments(removed, "runs/x")


def test_a_missing_translator_without_history_names_the_make_target(tmp_path, monkeypatch, capsys):
    extra = _script()
    monkeypatch.setattr(extra, "weights_from_history", lambda name, record: None)  # as in a shallow clone
    assert extra.put_back("smollm2-135m__qwen2.5-coder-0.5b__single", False, "cpu", False, False) is False
    assert "make translators-extra RETRAIN=1" in capsys.readouterr().out
    extra.put_back("smollm2-135m__qwen2.5-coder-0.5b__single", True, "cpu", True, False)  # dry run: says, runs nothing
    said = capsys.readouterr().out
    assert "retrained translator, not the identical one" in said and "cag train --source smollm2-135m" in said
