"""The command line: listings, the demo on a tiny model, one-line errors with exit code 1."""

import subprocess
import sys

from typer.testing import CliRunner

from cli.main import app
from cag.testing import save_tiny_model

runner = CliRunner()


def test_models_lists_every_alias_with_source_and_availability():
    result = runner.invoke(app, ["models"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for alias in ("smollm2-135m", "qwen2.5-coder-0.5b", "gemma3-270m", "opt-6.7b", "llama-3.2-1b-instruct"):
        assert alias in result.output
    assert "facebook/opt-6.7b" in result.output and "needs network" in result.output


def test_demo_on_a_tiny_model_answers_from_the_stored_cache(tmp_path, cag_home):
    folder = save_tiny_model(tmp_path / "tiny", "qwen2", max_position_embeddings=4096)
    result = runner.invoke(app, ["demo", "--model", str(folder), "--max-new-tokens", "4"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "stored" in result.output and "reloaded" in result.output
    assert result.output.count("yes") == 3  # cache and prompt answers agree on all three questions
    assert list((cag_home / "demo").glob("*.safetensors"))


def test_bad_model_is_one_line_and_exit_code_1(tmp_path):
    env = {"CAG_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "cli", "demo", "--model", "no-such-model"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith("Error: Unknown model 'no-such-model'")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_debug_env_shows_the_traceback(tmp_path):
    env = {"CAG_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "CAG_DEBUG": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "cli", "demo", "--model", "no-such-model"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "Traceback" in proc.stderr
