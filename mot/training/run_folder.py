"""What a training run folder holds besides the model (mot/training/train.py): a config claimed
once, metrics appended as JSON Lines, the learning-rate schedule, the records a resumed run drops
and sums, and the checkpointed optimizer state."""

import json
import logging
import math
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from cag.atomic import atomic_write, atomic_write_text
from cag.errors import CagError

log = logging.getLogger(__name__)


def claim(path: Path, wanted: dict, mismatch: str, defaults: dict | None = None, held_as=None) -> None:
    """Write `wanted` to the JSON file `path`, or check that it already holds exactly that (a key
    missing from the file, written before that setting existed, stands for its value in `defaults`;
    `held_as` maps what the file holds first, e.g. dropping settings removed since)."""
    if path.is_file():
        held = json.loads(path.read_text())
        held = {**(defaults or {}), **(held_as(held) if held_as else held)}
        if held != wanted:
            raise CagError(mismatch)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(wanted, indent=2))


def lr_at(step: int, lr: float, warmup: int, steps: int) -> float:
    """Linear warmup over `warmup` steps, then cosine to 0 at `steps`."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def append_record(path: Path, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def drop_records_after(path: Path, step: int, keep_events: tuple = ()) -> None:
    """Keep the step records up to `step` (the last checkpoint): the steps after it are redone; event
    records go too (a final evaluation is made again), but those named in `keep_events`."""
    if not path.is_file():
        return
    records = [(line, json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    kept = [line for line, r in records
            if r.get("event") in keep_events or ("event" not in r and r.get("step", 0) <= step)]
    atomic_write_text(path, "".join(line + "\n" for line in kept))


def train_seconds(path: Path) -> float:
    """Seconds spent in optimizer steps (over all sessions of a resumed run), from the metrics."""
    if not path.is_file():
        return 0.0
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sum(r.get("seconds", 0.0) for r in records if "step" in r)


def save_state(run: Path, tensors: dict, optimizer, step: int) -> None:
    """Checkpoint `tensors` (the trained weights, by name) and the optimizer's state at `step`."""
    tensors = dict(tensors)
    for i, state in optimizer.state_dict()["state"].items():
        for name, value in state.items():
            tensors[f"opt.{i}.{name}"] = torch.as_tensor(value).detach().cpu().contiguous()
    atomic_write(run / "state.safetensors", lambda tmp: save_file(tensors, str(tmp)))
    atomic_write_text(run / "state.json", json.dumps({"step": step}))


def load_state(run: Path, optimizer) -> tuple[int, dict]:
    """(step, the weights saved by save_state) with the optimizer's state restored; (0, {}) for a
    run with no checkpoint yet."""
    if not (run / "state.json").is_file():
        return 0, {}
    step = json.loads((run / "state.json").read_text())["step"]
    tensors = load_file(str(run / "state.safetensors"))
    state = optimizer.state_dict()
    for key, value in tensors.items():
        if key.startswith("opt."):
            _, index, name = key.split(".", 2)
            state["state"].setdefault(int(index), {})[name] = value
    optimizer.load_state_dict(state)
    log.info("resumed %s at step %d", run, step)
    return step, {k: v for k, v in tensors.items() if not k.startswith("opt.")}
