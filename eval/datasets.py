"""Evaluation datasets: JSON Lines in three schemas, named presets, validation and sampling."""

import json
import random
from pathlib import Path

from cag.errors import CagError
from eval.long_documents import LENGTHS as DOCUMENT_PRESETS, document_dataset

DATA = Path(__file__).resolve().parents[1] / "data"
TASKS = ("extractive", "multiple_choice", "multi_doc")
PRESETS = {
    "squad": ("squad_v1.1/dev.jsonl", "extractive"),
    "boolq": ("boolq/dev.jsonl", "multiple_choice"),
    "arc-challenge": ("arc_challenge/test.jsonl", "multiple_choice"),
    "arc-easy": ("arc_easy/test.jsonl", "multiple_choice"),
    "openbookqa": ("openbookqa/test.jsonl", "multiple_choice"),
    "mmlu": ("mmlu/val.jsonl", "multiple_choice"),
    "hotpotqa": ("hotpotqa_distractor/dev_sample.jsonl", "multi_doc"),
    "hotpotqa-20": ("hotpotqa_distractor/dev_20passages.jsonl", "multi_doc"),  # scripts/build_hotpotqa_wide.py
    "hotpotqa-amor": ("hotpotqa_distractor/amor_sample.jsonl", "multi_doc"),  # extra dev/test questions
    # long documents built on first use from squad_v1.1/dev.jsonl (eval.long_documents)
    **{name: (None, "multi_doc") for name in DOCUMENT_PRESETS},
}
_FIELDS = {
    "extractive": {"id": str, "context": str, "question": str, "answers": list},
    "multiple_choice": {"id": str, "context": str, "question": str, "choices": list, "answer_index": int},
    "multi_doc": {"id": str, "documents": list, "question": str, "answers": list},
}


def resolve_dataset(name_or_path: str, task: str | None) -> tuple[Path, str]:
    """(path, task) for a preset name or a file path; the task must be given for a path."""
    if name_or_path in PRESETS:
        rel, preset_task = PRESETS[name_or_path]
        if task and task != preset_task:
            raise CagError(f"Preset {name_or_path} is a {preset_task} dataset, not {task}.")
        return (DATA / rel if rel else document_dataset(name_or_path)), preset_task
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        raise CagError(f"Dataset {name_or_path} is neither a file nor a preset "
                       f"({', '.join(PRESETS)}).")
    if task is None:
        raise CagError("--task is required for a dataset file: extractive, multiple_choice or multi_doc.")
    if task not in TASKS:
        raise CagError(f"Unknown task {task!r}; choose one of {', '.join(TASKS)}.")
    return path, task


def load_examples(path: Path, task: str) -> list[dict]:
    """Every record of a JSON Lines file, validated against `task`'s schema."""
    if task not in TASKS:
        raise CagError(f"Unknown task {task!r}; choose one of {', '.join(TASKS)}.")
    examples = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CagError(f"{path} line {number}: not valid JSON ({exc.msg}).") from exc
            _validate(record, task, path, number)
            examples.append(record)
    if not examples:
        raise CagError(f"{path} has no examples.")
    return examples


def _validate(record, task: str, path: Path, number: int) -> None:
    if not isinstance(record, dict):
        raise CagError(f"{path} line {number}: a record must be a JSON object.")
    for field, kind in _FIELDS[task].items():
        if field not in record:
            raise CagError(f"{path} line {number}: missing field {field!r} for task {task}.")
        if not isinstance(record[field], kind) or (kind is int and isinstance(record[field], bool)):
            raise CagError(f"{path} line {number}: field {field!r} must be {kind.__name__}.")
    if task == "multiple_choice" and not 0 <= record["answer_index"] < len(record["choices"]):
        raise CagError(f"{path} line {number}: answer_index {record['answer_index']} is outside choices.")
    if task == "multi_doc" and not all(isinstance(d, dict) and isinstance(d.get("text"), str)
                                       for d in record["documents"]):
        raise CagError(f"{path} line {number}: every document needs a 'text' string.")


def sample(examples: list[dict], task: str, limit: int | None, seed: int,
           one_per_context: bool = True) -> list[dict]:
    """`limit` examples drawn with `seed`; extractive sets keep one question per distinct context."""
    pool = examples
    if task == "extractive" and one_per_context:
        by_context: dict[str, list] = {}
        for ex in examples:
            by_context.setdefault(ex["context"], []).append(ex)
        rng = random.Random(seed)
        pool = [rng.choice(group) for group in by_context.values()]
    rng = random.Random(seed)
    order = list(range(len(pool)))
    rng.shuffle(order)
    chosen = order if limit is None else order[:limit]
    return [pool[i] for i in chosen]
