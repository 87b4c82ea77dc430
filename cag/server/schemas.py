"""Request bodies. cag's own endpoints refuse unknown fields (a typo is named, not ignored); the
OpenAI-compatible one accepts the fields OpenAI clients send and ignores those it does not use."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from cag.defaults import DEFAULT_BLEND, DEFAULT_MAX_NEW_TOKENS, DEFAULT_TOP_K
from cag.modes.registry import AUTO

BlendShare = Annotated[float, Field(ge=0.0, le=1.0)]  # blend modes: the share of context tokens recomputed


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskBody(_Strict):
    question: str
    model: str | None = None  # default: the server's first --models
    mode: str = AUTO
    top_k: int = Field(DEFAULT_TOP_K, ge=1)
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1)
    blend: BlendShare = DEFAULT_BLEND
    stream: bool = False


class UploadedDocument(_Strict):
    name: str  # a plain file name with a text suffix (notes.md); saved under STORE/uploads/
    text: str


class IngestBody(_Strict):
    paths: list[str] = []  # under the server's --ingest-root folders
    documents: list[UploadedDocument] = []


class SessionBody(_Strict):
    memory_model: str | None = None  # default: the store's encoder


class TurnBody(_Strict):
    message: str
    model: str | None = None
    history_mode: str = AUTO  # auto, native, translated, direct, or any registered mode
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1)
    blend: BlendShare = DEFAULT_BLEND  # of the history
    remember: bool = True  # false: ask the history without adding this turn to it
    stream: bool = False


class RecordBody(_Strict):
    author: str  # the agent (or model) that wrote it
    content: str
    role: str = "note"


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list | None = None  # a string, or OpenAI content parts ({"type": "text", "text": ...})


class CagOptions(_Strict):
    """The `cag` extension field of a chat completion request."""

    mode: str = AUTO
    top_k: int = Field(DEFAULT_TOP_K, ge=1)
    blend: BlendShare = DEFAULT_BLEND


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, top_p, user, ...: accepted, unused (greedy)
    model: str
    messages: list[ChatMessage]
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    cag: CagOptions = CagOptions()
