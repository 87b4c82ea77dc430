"""The OpenAI chat-completions shapes: a request's question (its last user message; retrieval runs
on it), and the completion or its streamed chunks, with cag's mode, sources and timings in the
extension field `cag`."""

import time
import uuid
from dataclasses import asdict

from cag.server.errors import HttpError


def text_of(content) -> str:
    """A message's text: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content
                   if isinstance(part, dict) and part.get("type") in ("text", "input_text"))


def question_of(messages: list) -> tuple[str, list[str]]:
    """(the last user message, notes on what was not read)."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise HttpError("messages has no user message: the last user message is the question.")
    question = text_of(messages[users[-1]].content)
    if not question.strip():
        raise HttpError("The last user message is empty.")
    skipped = len(messages) - 1
    notes = [f"{skipped} earlier or system message(s) not read: cag answers the last user message from the "
             "store; keep a conversation with /v1/sessions"] if skipped else []
    return question, notes


def new_id() -> tuple[str, int]:
    return f"chatcmpl-{uuid.uuid4().hex}", int(time.time())


def extension(answered, notes: list[str]) -> dict:
    result = answered.result
    return {"mode": result.mode, "sources": [asdict(s) for s in result.sources],
            "context_tokens": result.context_tokens, "timings_ms": result.timings_ms,
            "notes": result.notes + notes}


def finish_reason(answered, max_new_tokens: int) -> str:
    """"length" when the answer used every token allowed (no end token came), else "stop"."""
    return "length" if answered.completion_tokens >= max_new_tokens else "stop"


def unsent_tail(answer: str, sent: str) -> str:
    """The end of `answer` the token stream did not carry (a last token that decodes to half a
    character is held back while streaming; the final answer has it)."""
    sent = sent.lstrip()
    return answer[len(sent):] if answer.startswith(sent) else ""


def usage(answered) -> dict:
    return {"prompt_tokens": answered.prompt_tokens, "completion_tokens": answered.completion_tokens,
            "total_tokens": answered.prompt_tokens + answered.completion_tokens}


def completion(answered, model: str, max_new_tokens: int, notes: list[str]) -> dict:
    cid, created = new_id()
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answered.result.answer},
                         "finish_reason": finish_reason(answered, max_new_tokens), "logprobs": None}],
            "usage": usage(answered), "cag": extension(answered, notes)}


def chunk(cid: str, created: int, model: str, delta: dict, finish: str | None = None, **extra) -> dict:
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
