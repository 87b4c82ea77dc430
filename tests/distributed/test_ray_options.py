"""--ray's options without a cluster: addresses, worker sizing, a wrong address in one line."""

import pytest
from typer.testing import CliRunner

from cag.distributed.cluster import Cluster, plan_workers
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
