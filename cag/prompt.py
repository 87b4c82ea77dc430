"""How a context and a question are laid out for a generator, as token ids.

    [prefix] [context chunks ...] [question suffix]

The prefix is native (BOS and/or the chat template's opening, with the instruction), prefilled by
the generator; chunks are the cached part; the suffix carries the question (inside the chat
template's user turn and the assistant opening, when the model has a template). Each piece is
tokenized on its own, so direct prompting and cache assembly see exactly the same token ids.
"""

from dataclasses import dataclass

_CONTEXT = "\x00CAG_CONTEXT\x00"
_QUESTION = "\x00CAG_QUESTION\x00"
INSTRUCTION = "Answer the question using the context. Reply with a short answer."
_USER_TURN = f"{INSTRUCTION}\n\nContext:\n{_CONTEXT}\n\nQuestion: {_QUESTION}"
_PLAIN_PREFIX = "Context:\n"
_PLAIN_SUFFIX = f"\n\nQuestion: {_QUESTION}\nAnswer:"


@dataclass(frozen=True)
class PromptLayout:
    prefix_ids: tuple  # native prefix, the same for every question
    suffix_template: str  # text after the context, with the question placeholder
    uses_chat_template: bool

    def question_ids(self, tokenizer, question: str) -> list[int]:
        text = self.suffix_template.replace(_QUESTION, question.strip())
        return tokenizer(text, add_special_tokens=False)["input_ids"]


def adds_bos(tokenizer) -> bool:
    bos = tokenizer.bos_token_id
    ids = tokenizer("a")["input_ids"]
    return bos is not None and bool(ids) and ids[0] == bos


def prompt_layout(tokenizer, use_chat_template: bool = True) -> PromptLayout:
    """The layout for `tokenizer`'s model: chat template when it has one, else a plain format."""
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": _USER_TURN}],
                                                 tokenize=False, add_generation_prompt=True)
        head, tail = rendered.split(_CONTEXT)
        prefix = tokenizer(head, add_special_tokens=False)["input_ids"]
        return PromptLayout(tuple(prefix), tail, True)
    prefix = tokenizer(_PLAIN_PREFIX, add_special_tokens=False)["input_ids"]
    if adds_bos(tokenizer):
        prefix = [tokenizer.bos_token_id] + prefix
    return PromptLayout(tuple(prefix), _PLAIN_SUFFIX, False)
