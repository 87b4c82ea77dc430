"""Ingest: read files, chunk them, embed and prefill each chunk once, store everything."""
