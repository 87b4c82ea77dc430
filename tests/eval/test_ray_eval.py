"""`cag eval --ray` on a local Ray cluster: the predictions of a local run, resumed when cut short."""

import json
from pathlib import Path

import pytest

from cag.distributed.options import RayOptions
from eval.ray_eval import run_eval_on_ray
from eval.runner import EvalConfig, run_eval

SQUAD5 = Path(__file__).parent / "squad5.jsonl"
pytestmark = pytest.mark.xdist_group("ray")  # one local Ray cluster at a time (make test runs two workers)


def config(tiny_models, out, **extra):
    return EvalConfig(**{**dict(dataset=str(SQUAD5), task="extractive", model=tiny_models["generator"],
                                encoder=tiny_models["encoder"], max_new_tokens=4, out=str(out)), **extra})


def predictions(run: Path) -> dict:
    records = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == len({(r["id"], r["mode"]) for r in records})  # nothing answered twice
    return {(r["id"], r["mode"]): (r["prediction"], r["score"], r["context_tokens"]) for r in records}


@pytest.mark.parametrize("corpus", ["per-question", "shared"])
def test_ray_eval_gives_the_local_predictions_and_resumes(ray_cluster, tiny_models, tmp_path, corpus):
    local = run_eval(config(tiny_models, tmp_path / "local", corpus=corpus))
    remote = run_eval_on_ray(config(tiny_models, tmp_path / "ray", corpus=corpus), RayOptions(workers=2))
    want = predictions(local)
    assert predictions(remote) == want and len(want) == 15
    metrics = json.loads((remote / "metrics.json").read_text())
    assert metrics["model"] == json.loads((local / "metrics.json").read_text())["model"]
    # the shared store's retrieval, made on the driver, is the local run's
    assert metrics.get("retrieval") == json.loads((local / "metrics.json").read_text()).get("retrieval")
    assert ("retrieval" in metrics) == (corpus == "shared")
    assert metrics["modes"]["native"]["bytes_stored_per_context_token"] > 0  # the generator's own caches, found
    # cut short as by a driver killed mid-write (a real kill -9 of a Ray driver: tests/distributed)
    lines = (remote / "predictions.jsonl").read_text().splitlines()
    (remote / "predictions.jsonl").write_text("\n".join(lines[:4]) + '\n{"id": "torn')
    run_eval_on_ray(config(tiny_models, tmp_path / "ray", corpus=corpus), RayOptions(workers=2))
    assert predictions(remote) == want
