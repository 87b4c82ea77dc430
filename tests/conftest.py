import os

import pytest

# huggingface_hub reads HF_HUB_OFFLINE once, when it is first imported: set here, before any test
# module imports transformers (a monkeypatch in a fixture comes too late: a hub id then waited 46 s
# on network timeouts); subprocesses inherit it
os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(autouse=True)
def cag_home(tmp_path, monkeypatch):
    """Every test gets its own cag home and never reaches the model hub."""
    home = tmp_path / "cag_home"
    monkeypatch.setenv("CAG_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def real_cag_home(tmp_path_factory):
    """Slow tests share converted packaged models: $CAG_HOME_SLOW, or a session folder."""
    import os
    return os.environ.get("CAG_HOME_SLOW") or str(tmp_path_factory.mktemp("real_cag_home"))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Tiny encoder (llama) and generator (qwen2) folders, loadable by path from the CLI too."""
    from tests.tiny_models import save_tiny_model
    root = tmp_path_factory.mktemp("tiny_models")
    return {"encoder": str(save_tiny_model(root / "enc", "llama", max_position_embeddings=4096)),
            "generator": str(save_tiny_model(root / "gen", "qwen2", seed=3, max_position_embeddings=4096))}


@pytest.fixture
def corpus(tmp_path):
    """A small corpus in every supported format, plus one binary file."""
    import json
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "lobster.md").write_text("# Lobster\n\nThe European lobster may grow to a length of 60 cm. "
                                     "It is blue in life and red after cooking. " * 3)
    (root / "mountain.txt").write_text("Mount Elbert is the highest summit of the Rocky Mountains, "
                                       "at 14,440 feet. It was named after Samuel Hitt Elbert. " * 3)
    (root / "sub" / "planet.html").write_text("<html><script>var x;</script><body><p>Upsilon Andromedae b "
                                              "is an exoplanet found in 1996.</p></body></html>")
    (root / "sub" / "storm.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"text": "Hurricane Beatriz formed in June 2011 near Mexico."},
        {"text": "Beatriz caused four deaths and heavy rain."}]) + "\n")
    (root / "sub" / "blob.txt").write_bytes(bytes(range(256)) * 4)
    return root


def _children(pids: set) -> set:
    """Every descendant of `pids` (read from /proc)."""
    parents = {}
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                with open(f"/proc/{stat}/stat") as handle:
                    parents[int(stat)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), set(pids)
    while todo:
        pid = todo.pop()
        kids = {p for p, parent in parents.items() if parent == pid} - found
        found |= kids
        todo |= kids
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster (4 logical CPUs) for one test module, started once (about 7 s on a 2-core
    machine); yields its address, for drivers in subprocesses. Afterwards none of its processes
    (its services and every worker they started) is left."""
    import time

    import ray
    ray.init(address="local", num_cpus=4, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    node = ray._private.worker._global_node
    services = {p.process.pid for procs in node.all_processes.values() for p in procs}
    try:
        yield node.address
    finally:
        started = services | _children(services)
        ray.shutdown()
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.2)
    assert not [p for p in started if _alive(p)], "Ray processes left after shutdown"
