"""Convert a GGUF file once into a transformers folder (safetensors + tokenizer) under the cag home.

Loading straight from GGUF dequantizes every tensor and rebuilds the tokenizer from metadata
(17-52 s here); the converted folder reloads in a few seconds with identical logits.
"""

import contextlib
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

import torch
from filelock import FileLock, Timeout

from cag.errors import CagError
from cag.home import cag_home
from cag.models.fingerprint import files_digest, weight_files

log = logging.getLogger(__name__)

MANIFEST = "cag_model.json"
FORMAT_VERSION = 1


def converted_dir(name: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    return cag_home() / "models" / safe


def is_converted(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


@contextlib.contextmanager
def parsed_once():
    """Within the block, a GGUF file opened again is the reader already parsed. transformers opens
    the file three times in one conversion (tokenizer, config, weights), and each opening parses all
    of its metadata in Python, one array element at a time (the tokenizer's 151k tokens for
    qwen2.5): most of a conversion's time. The reader only reads (a read-only memmap)."""
    import gguf as gguf_module

    original = gguf_module.GGUFReader
    readers: dict = {}

    def reader(path, *args, **kwargs):
        key = (str(Path(path).resolve()), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = original(path, *args, **kwargs)
        return readers[key]

    gguf_module.GGUFReader = reader  # transformers imports it from the module at each call
    try:
        yield
    finally:
        gguf_module.GGUFReader = original


def convert_gguf(gguf: Path, folder: Path) -> Path:
    """Dequantize `gguf` to fp32 and save it as a transformers folder at `folder` (atomically)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(gguf)
    log.info("converting %s (once) into %s", gguf.name, folder)
    start = time.perf_counter()
    try:
        with parsed_once():
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                         dtype=torch.float32)
    except Exception as exc:  # transformers raises many types for a bad or unsupported GGUF
        raise CagError(f"Could not read GGUF file {gguf}: {exc}") from exc
    gguf_seconds = time.perf_counter() - start
    # a GGUF-loaded model refuses save_pretrained until its quantizer is detached
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{folder.name}.", dir=folder.parent))
    tmp.chmod(0o755)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        manifest = {"format_version": FORMAT_VERSION, "source_gguf": gguf.name,
                    "source_bytes": gguf.stat().st_size, "gguf_load_seconds": round(gguf_seconds, 2),
                    "weights_sha256": files_digest(weight_files(tmp))}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("converted %s in %.1f s", gguf.name, time.perf_counter() - start)
    return folder


def read_manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST).read_text())


def converted_for(name: str, gguf_locator) -> Path:
    """The converted folder for `name`, converting from `gguf_locator()` the first time. Processes
    that need the same model at once (two `cag` commands on a fresh machine, Ray workers beside
    their driver) convert it once: the others wait for it, instead of converting it again and
    replacing the folder under a process already loading it."""
    folder = converted_dir(name)
    if is_converted(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder.parent / f".{folder.name}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.warning("waiting for another process converting %s", name)
        lock.acquire()
    try:
        if not is_converted(folder):
            convert_gguf(gguf_locator(), folder)
    finally:
        lock.release()
    return folder
