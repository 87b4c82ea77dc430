"""--ray without a cluster: addresses, worker sizing, a wrong address or a store URL in one line, workers
that cannot start."""

import pytest
from typer.testing import CliRunner

from cag.distributed.cluster import Cluster, WorkerPlan, plan_workers
from cag.distributed.options import RayOptions
from cag.errors import CagError
from cli.main import app


@pytest.mark.parametrize("address,message", [
    ("nowhere", "give auto, local or a cluster's address HOST:PORT"),
    ("ray://head:10001", "Ray Client addresses are not supported"),
])
def test_bad_addresses_are_refused(address, message):
    with pytest.raises(CagError, match=message):
        RayOptions(address)


def test_an_address_where_no_cluster_answers_is_one_line(tmp_path, corpus):
    result = CliRunner().invoke(app, ["ingest", str(corpus), "--store", str(tmp_path / "s"), "--ray", "127.0.0.1:1"])
    assert result.exit_code == 1 and "--ray 127.0.0.1:1: no Ray cluster answers there" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "s").exists()


@pytest.mark.parametrize("url", ["s3://bucket/store", "memory://store", "file:///tmp/store"])
def test_a_store_url_is_refused_before_the_cluster(tmp_path, corpus, monkeypatch, url):
    """Workers write into the store folder as a POSIX path every node mounts; a URL is one line."""
    monkeypatch.chdir(tmp_path)  # pathlib would read s3://bucket as the relative folder s3:/bucket
    for args in (["ingest", str(corpus), "--store", url, "--ray", "127.0.0.1:1"], ["ask", "Who?", "--store", url]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1 and "a URL; a store is a folder on a POSIX file system" in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["corpus"]  # no folder made


def test_workers_fill_the_cluster_and_must_fit():
    cpus = Cluster(cpus=8, gpus=0, started=True)
    assert plan_workers(cpus, 2, RayOptions()) == plan_workers(cpus, 2, RayOptions(workers=4))
    assert plan_workers(cpus, 1, RayOptions(cpus_per_worker=2)).per_model == 4
    assert plan_workers(Cluster(8, 2, False), 1, RayOptions()).device == "cuda"
    assert plan_workers(Cluster(8, 2, False), 1, RayOptions(), "cpu").num_gpus == 0
    with pytest.raises(CagError, match="need 10 CPUs; the cluster has 8"):
        plan_workers(cpus, 2, RayOptions(workers=5))
    with pytest.raises(CagError, match="the Ray cluster has no GPUs"):
        plan_workers(cpus, 1, RayOptions(), "cuda")


def test_workers_can_share_a_gpu():
    """Small models leave a large GPU mostly idle: --ray-gpus-per-worker packs several workers on each."""
    one_gpu = Cluster(cpus=16, gpus=1, started=True)
    assert plan_workers(one_gpu, 1, RayOptions()) == WorkerPlan(1, 1, 1.0, "cuda")
    assert plan_workers(one_gpu, 1, RayOptions(gpus_per_worker=0.25)) == WorkerPlan(4, 1, 0.25, "cuda")
    assert plan_workers(Cluster(64, 3, False), 1, RayOptions(gpus_per_worker=0.1)).per_model == 30
    assert plan_workers(Cluster(16, 3, False), 1, RayOptions(gpus_per_worker=0.1)).per_model == 16  # CPUs
    assert plan_workers(one_gpu, 2, RayOptions(gpus_per_worker=0.3)).per_model == 1  # 3 slots, 2 models
    assert plan_workers(one_gpu, 1, RayOptions(gpus_per_worker=0.5), "cpu") == WorkerPlan(16, 1, 0, "cpu")
    with pytest.raises(CagError, match=r"x 0.5 GPU need 1.5 GPUs; the cluster has 1: pass --ray-workers 2 "):
        plan_workers(one_gpu, 1, RayOptions(workers=3, gpus_per_worker=0.5))
    for share in (0, -0.5, 1.5):
        with pytest.raises(CagError, match="give a share of one GPU, above 0 and at most 1"):
            RayOptions(gpus_per_worker=share)


def test_the_gpu_share_is_a_cli_option(tmp_path, corpus):
    result = CliRunner().invoke(app, ["ingest", str(corpus), "--store", str(tmp_path / "s"), "--ray", "local",
                                      "--ray-gpus-per-worker", "2"])
    assert result.exit_code == 1 and "--ray-gpus-per-worker 2: give a share of one GPU" in result.output
    assert not (tmp_path / "s").exists()


def test_a_worker_that_cannot_start_says_why(tiny_models, tmp_path):
    """The actor class itself, without Ray: a store folder it cannot see, a model other than the driver's."""
    from dataclasses import replace

    from cag.distributed.prefill import PrefillSpec, PrefillWorker
    from cag.ingest.pipeline import model_space
    from cag.models.loading import model_identity
    from cag.store.spaces import Role
    space = model_space(model_identity(tiny_models["encoder"]), Role.ENCODER).space
    spec = PrefillSpec(tiny_models["encoder"], "fp32", "cpu", 1, str(tmp_path / "nowhere"), space, 2)
    assert "nowhere is not usable here" in PrefillWorker(spec).problem()
    assert "on the driver" in PrefillWorker(replace(spec, model=tiny_models["generator"])).problem()
