"""Put back the translators that neither set-up uses (the single-path and ridge baselines, the pairs
from qwen2.5-coder-0.5b into smaller generators) into $CAG_HOME/translators/, where `cag ask`,
`cag eval` and the benchmarks find them (mot/registry.py). They left `translators/` to keep the
checkout small; each one's JSON record stays in records/translators/NAME.json.

The weights come from this clone's git history: the last commit holding
translators/NAME.safetensors whose bytes match the record's weights_sha256 (seconds, identical
files). A clone without that history (`git clone --depth 1`) cannot; with --retrain each missing
one is trained again by `cag train` from the training config its record holds (spec.training):
long (the recorded training time, minutes to half an hour each on a 2-core CPU, plus preparing
windows), and the result is a retrained translator, not the identical one (other weights, its own
fingerprint, and no recorded QA retention until measured again).

Usage: python scripts/translators_extra.py [NAME ...] [--retrain] [--dry-run] [--force]
       (`make translators-extra`, `make translators-extra RETRAIN=1`)
"""

import argparse
import json
import shlex
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cag.atomic import atomic_write_bytes  # noqa: E402
from cag.home import cag_home  # noqa: E402
from cag.models.fingerprint import sha256_hex  # noqa: E402
from cli.config_options import option_flag  # noqa: E402
from mot.training.config import ABSENT_MEANS, TrainConfig, without_retired  # noqa: E402

RECORDS = ROOT / "records" / "translators"
TRACKED = "translators"  # where the weights were tracked, in the history
MAPPED_APART = {"corpus", "heldout_corpus", "window", "dtype", "init"}  # spelled out below
# recorded beside the settings: where the run lived, how long it took, what came out
NOT_SETTINGS = {"out", "data", "device", "train_tokens", "train_seconds", "prepare_seconds_this_session",
                "parameters", "target_parameters"}
# TrainConfig field -> its `cag train` option (as cli/train.py makes it from the field)
OPTIONS = {f.name: option_flag(f) for f in fields(TrainConfig)
           if f.metadata.get("help") and f.name not in MAPPED_APART | NOT_SETTINGS}
DEFAULTS = TrainConfig().to_json()
FIXED = set(DEFAULTS) - set(OPTIONS) - MAPPED_APART - NOT_SETTINGS  # no option: must be the default


def extra_names(records: Path = RECORDS) -> list[str]:
    return sorted(p.name[:-len(".json")] for p in records.glob("*.json"))


def read_extra(name: str, records: Path = RECORDS) -> dict:
    path = records / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"no recorded translator {name!r}; choose from {', '.join(extra_names(records))}")
    return json.loads(path.read_text())


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True)


def weights_from_history(name: str, record: dict, root: Path = ROOT) -> tuple[str, bytes] | None:
    """(commit, weights) of the newest commit whose translators/NAME.safetensors has the record's
    sha256, or None where this clone's history holds no such file (or git is not there)."""
    path = f"{TRACKED}/{name}.safetensors"
    try:
        log = _git(root, "log", "--format=%H", "--diff-filter=AM", "--", path)
    except FileNotFoundError:
        return None  # no git
    for commit in log.stdout.decode().split() if log.returncode == 0 else []:
        blob = _git(root, "cat-file", "blob", f"{commit}:{path}")
        if blob.returncode == 0 and sha256_hex(blob.stdout) == record["weights_sha256"]:
            return commit, blob.stdout
    return None


def install(name: str, weights: bytes, records: Path = RECORDS, home: Path | None = None) -> Path:
    """Write NAME.safetensors, then its record NAME.json (what the registry looks for) into
    HOME/translators/."""
    folder = (home or cag_home()) / "translators"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(folder / f"{name}.safetensors", weights)
    atomic_write_bytes(folder / f"{name}.json", (records / f"{name}.json").read_bytes())
    return folder / f"{name}.safetensors"


def _repository_path(recorded: str) -> str:
    """A recorded corpus path (absolute, in the checkout that trained it) as this checkout's
    data/... path."""
    parts = Path(recorded).parts
    for i, part in enumerate(parts):
        if part == "data" and ROOT.joinpath(*parts[i:]).is_file():
            return str(Path(*parts[i:]))
    raise SystemExit(f"the training text {recorded} is not in this checkout's data/: cannot retrain")


def train_arguments(record: dict, out: str, device: str = "cpu") -> list[str]:
    """The `cag train` arguments that train the recorded translator again (every setting spelled
    out, so later changes of the defaults do not change the recipe)."""
    # older records lack later settings (off); settings removed since must have been off
    training = {**ABSENT_MEANS, **without_retired(record["spec"]["training"], "The recorded translator")}
    unknown = sorted(set(training) - set(DEFAULTS) - NOT_SETTINGS)
    if unknown:
        raise SystemExit(f"the recorded training config has settings cag train does not know: {unknown}")
    fixed = {k: training[k] for k in sorted(FIXED) if training[k] != DEFAULTS[k]}
    if fixed:
        raise SystemExit(f"the recorded training config sets {fixed}, which cag train cannot set")
    if training["init"]:
        raise SystemExit(f"the translator continued from {training['init']}: retrain that one first")
    args = []
    for field, option in OPTIONS.items():
        args += [option, str(training[field])]
    for path in training["corpus"]:
        args += ["--corpus", _repository_path(path)]
    for path in training["heldout_corpus"]:
        args += ["--heldout", _repository_path(path)]
    if training["mode"] == "window":
        args += ["--window", "{}:{}".format(*training["window"])]
    # the weights as the record holds them (int8 ridge maps were converted after training)
    args += ["--weights-dtype", record["weights_dtype"], "--device", device, "--out", out]
    return args


def retrain(name: str, record: dict, device: str, dry_run: bool) -> None:
    args = train_arguments(record, f"runs/retrain-{name}", device)
    minutes = record["spec"]["training"].get("train_seconds", 0) / 60
    print(f"{name}: not in this clone's history; training it again (recorded: {minutes:.0f} min on a 2-core "
          f"CPU, plus preparing windows). The result is a retrained translator, not the identical one:\n"
          f"  cag train {shlex.join(args)}", flush=True)
    if not dry_run:
        subprocess.run([sys.executable, "-m", "cli", "train", *args], cwd=ROOT, check=True)


def put_back(name: str, retrain_missing: bool, device: str, dry_run: bool, force: bool) -> bool:
    """Restore one translator; False when it is missing and may not be trained."""
    record = read_extra(name)
    installed = cag_home() / "translators" / f"{name}.safetensors"
    if installed.is_file() and not force:
        same = sha256_hex(installed.read_bytes()) == record["weights_sha256"]
        print(f"{name}: installed already ({'the recorded one' if same else 'not the recorded one: retrained?'}; "
              f"--force replaces it)")
        return True
    found = weights_from_history(name, record)
    if found is not None:
        print(f"{name}: from commit {found[0][:12]} (sha256 checked){' (dry run)' if dry_run else ''}")
        if not dry_run:
            install(name, found[1])
        return True
    if not retrain_missing:
        print(f"{name}: not in this clone's history (a shallow clone?). `make translators-extra RETRAIN=1` "
              f"trains it again from its recorded config: long, and a retrained, not the identical, translator.")
        return False
    retrain(name, record, device, dry_run)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="translators (default: all of records/translators/)")
    parser.add_argument("--retrain", action="store_true", help="train again those the history lacks (long)")
    parser.add_argument("--device", default="cpu", help="device for --retrain's training (cpu, cuda)")
    parser.add_argument("--dry-run", action="store_true", help="say where each would come from; write nothing")
    parser.add_argument("--force", action="store_true", help="replace one installed already")
    args = parser.parse_args(argv)
    print(f"into {cag_home() / 'translators'}")
    ok = [put_back(n, args.retrain, args.device, args.dry_run, args.force) for n in args.names or extra_names()]
    if not all(ok):
        sys.exit(1)


if __name__ == "__main__":
    main()
