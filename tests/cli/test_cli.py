"""The command line: listings, the demo on a tiny model, one-line errors with exit code 1."""

import subprocess
import sys

from typer.testing import CliRunner

from cli.main import app
from tests.tiny_models import save_tiny_model

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


def test_progress_goes_to_a_log_as_plain_lines():
    import io

    from cli.progress_display import PlainProgress, progress_display

    log = io.StringIO()
    assert isinstance(progress_display(stream=log), PlainProgress)  # not a terminal
    with PlainProgress(log, every=3600) as progress:
        files = progress.add_task("files", total=None, rate="")
        steps = progress.add_task("steps", total=4, info="")
        progress.update(files, total=2)
        progress.advance(files)  # within `every` of the start: nothing printed yet
        assert log.getvalue() == ""
        progress.update(steps, advance=4, info="loss 0.5")  # a finished task prints at once
        assert log.getvalue().startswith("steps: 4/4 (") and log.getvalue().endswith("loss 0.5\n")
    assert log.getvalue().splitlines()[-1].startswith("files: 1/2, about ")  # the last state, at the end
    log = io.StringIO()
    with PlainProgress(log, every=0) as progress:
        task = progress.add_task("examples x modes", total=10)
        progress.advance(task, 4)
    assert "examples x modes: 4/10, about " in log.getvalue() and log.getvalue().count("\n") == 1


def test_prefill_rate_is_right_from_the_first_line_and_a_growing_total_gives_time_left(monkeypatch):
    """The rate runs from the task's start (not from its first report), so the first line after a
    3 s batch of 1,200 tokens says 400 tok/s; a total that grows as files are chunked gives an estimate."""
    import io

    import cli.progress_display as display
    from cli.progress_display import PlainProgress, ProgressBars

    now = [100.0]
    monkeypatch.setattr(display.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(display.time, "monotonic", lambda: now[0])
    log = io.StringIO()
    with PlainProgress(log, every=0) as plain:
        bars = ProgressBars(plain)
        bars.start("chunks prefilled")
        bars.grow("chunks prefilled", 16)
        now[0] += 3.0
        bars.advance("chunks prefilled", 8, tokens=1200)
        assert log.getvalue().splitlines()[-1].startswith("chunks prefilled: 8/16, about 0.1 min left")
        assert log.getvalue().splitlines()[-1].endswith("  400 tok/s")
        now[0] += 1.0
        bars.advance("chunks prefilled", 8, tokens=400)
    assert log.getvalue().splitlines()[-1].endswith("  400 tok/s")  # 1,600 tokens in 4 s
