import pytest


@pytest.fixture(autouse=True)
def cag_home(tmp_path, monkeypatch):
    """Every test gets its own cag home and never reaches the model hub."""
    home = tmp_path / "cag_home"
    monkeypatch.setenv("CAG_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


@pytest.fixture(scope="session")
def real_cag_home(tmp_path_factory):
    """Slow tests share converted packaged models: $CAG_HOME_SLOW, or a session folder."""
    import os
    return os.environ.get("CAG_HOME_SLOW") or str(tmp_path_factory.mktemp("real_cag_home"))
