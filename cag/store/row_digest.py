"""The sha256 that seals a chunk row of the catalog, by version.

Version 2 (written now) covers the row's place as well as its content: the document it belongs to
(file path and locator), how many chunks that document has, its index among them, its span and
token count, its text digest and its embedding. A row moved to another document, or renumbered, no
longer matches; a document that lost or gained a row no longer has the count its rows name.

Version 1 (catalogs written before) covered the content only (index, span, token count, text
digest, embedding): a row moved to another document still matched. Such rows are still read and
checked the version-1 way (`chunks.digest_version` says which); `cag store check --repair` seals
them again with version 2 once they verify (`Catalog.seal_first_digests`).
"""

import struct
from dataclasses import dataclass

from cag.models.fingerprint import sha256_hex

FIRST, CURRENT = 1, 2  # chunks.digest_version: the first digest, and the one written now


@dataclass(frozen=True)
class RowPlace:
    """Where a chunk row belongs: its document and the number of chunks the document had when it
    was written (None: a document written before that was recorded)."""

    path: str
    locator: str
    n_chunks: int | None


def row_digest_v1(idx: int, char_start: int, char_end: int, n_tokens: int, text_sha256: str,
                  embedding: bytes) -> str:
    """The first row digest: everything a row holds but its text (which `text_sha256` covers) and
    its document."""
    return sha256_hex(struct.pack("<4q", idx, char_start, char_end, n_tokens), text_sha256.encode(), embedding)


def row_digest_v2(place: RowPlace, idx: int, char_start: int, char_end: int, n_tokens: int,
                  text_sha256: str, embedding: bytes) -> str:
    """The row digest written now: its content and its place."""
    if place.n_chunks is None:
        raise ValueError("a version-2 row digest needs its document's chunk count")
    return sha256_hex(b"cag chunk row 2", place.path.encode(), place.locator.encode(),
                      struct.pack("<5q", place.n_chunks, idx, char_start, char_end, n_tokens),
                      text_sha256.encode(), embedding)


def row_digest(version: int, place: RowPlace, idx: int, char_start: int, char_end: int, n_tokens: int,
               text_sha256: str, embedding: bytes) -> str | None:
    """The digest of `version` (None: a version this cag does not know, or a version-2 row whose
    document has no chunk count: it cannot match)."""
    if version == FIRST:
        return row_digest_v1(idx, char_start, char_end, n_tokens, text_sha256, embedding)
    if version == CURRENT and place.n_chunks is not None:
        return row_digest_v2(place, idx, char_start, char_end, n_tokens, text_sha256, embedding)
    return None


def digest_problem(version: int, place: RowPlace, idx: int, char_start: int, char_end: int, n_tokens: int,
                   text_sha256: str, embedding: bytes, stored: str | None) -> str | None:
    """What is wrong with a row's digest (None: it matches)."""
    if version not in (FIRST, CURRENT):
        return f"its digest is of version {version}, which this cag does not know (a newer cag wrote it?)"
    expected = row_digest(version, place, idx, char_start, char_end, n_tokens, text_sha256, embedding)
    if stored is None or expected != stored:
        what = "embedding, span or digest" if version == FIRST else "document, place, embedding, span or digest"
        return f"its {what} does not match the row's sha256"
    return None
