"""KV caches: geometry, rotary positions, chunk prefill, storage, assembly and generation."""
