"""Split documents into chunks sized in the encoder's tokens, with llama-index's SentenceSplitter."""

from dataclasses import dataclass

from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter

from cag.defaults import DEFAULT_CHUNK_TOKENS
from cag.errors import CagError


@dataclass(frozen=True)
class TextChunk:
    idx: int
    text: str
    char_start: int  # span of the chunk in its document's text
    char_end: int


def check_chunking(chunk_tokens: int, overlap: int) -> None:
    if chunk_tokens < 16:
        raise CagError(f"--chunk-tokens {chunk_tokens} is too small; use 16 or more.")
    if not 0 <= overlap < chunk_tokens:
        raise CagError(f"Chunk overlap {overlap} must be in [0, chunk tokens).")


class Chunker:
    def __init__(self, tokenizer, chunk_tokens: int = DEFAULT_CHUNK_TOKENS, overlap: int = 0):
        check_chunking(chunk_tokens, overlap)
        self.splitter = SentenceSplitter(
            chunk_size=chunk_tokens, chunk_overlap=overlap,
            tokenizer=lambda text: tokenizer.encode(text, add_special_tokens=False),
            include_metadata=False, include_prev_next_rel=False)

    def split(self, text: str) -> list[TextChunk]:
        nodes = self.splitter.get_nodes_from_documents([Document(text=text)])
        chunks = []
        for node in nodes:
            if not node.text.strip():
                continue
            start = node.start_char_idx if node.start_char_idx is not None else text.find(node.text)
            end = node.end_char_idx if node.end_char_idx is not None else start + len(node.text)
            chunks.append(TextChunk(len(chunks), node.text, start, end))
        return chunks
