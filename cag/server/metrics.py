"""Prometheus metrics of one server (its own registry, so that several apps in one process, as in
tests, never share counters): requests and errors per endpoint, and per mode and model the time to
the first token and the time spent waiting in a model's queue; the memory tier's hits, misses,
evictions and bytes."""

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

# seconds: the warm native path answers in tens of ms on small models, direct reading of a long
# context takes tens of seconds on a CPU
_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0)
_QUEUE_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class MemoryTierCollector:
    """The memory tier's figures, read when /metrics is scraped."""

    def __init__(self, tier):
        self.tier = tier

    def collect(self):
        stats = self.tier.stats()
        for name, value, what in (("hits", stats.hits, "Chunk caches served from memory"),
                                  ("misses", stats.misses, "Chunk caches read from disk (then kept in memory)"),
                                  ("evictions", stats.evictions, "Chunk caches dropped, least recently used first")):
            yield CounterMetricFamily(f"cag_memory_tier_{name}", what, value=value)
        yield GaugeMetricFamily("cag_memory_tier_bytes", "Bytes of decoded chunk caches held", value=stats.bytes)
        yield GaugeMetricFamily("cag_memory_tier_max_bytes", "The memory tier's size", value=stats.max_bytes)
        yield GaugeMetricFamily("cag_memory_tier_entries", "Chunk caches held", value=stats.entries)


class ServerMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, memory_tier=None):
        self.registry = CollectorRegistry()
        if memory_tier is not None:
            self.registry.register(MemoryTierCollector(memory_tier))
        self.requests = Counter("cag_requests", "HTTP requests answered, by endpoint and status",
                                ["endpoint", "status"], registry=self.registry)
        self.errors = Counter("cag_request_errors", "HTTP requests answered with a 4xx or 5xx, by endpoint "
                              "and status", ["endpoint", "status"], registry=self.registry)
        self.answers = Counter("cag_answers", "Answers generated, by context mode and model",
                               ["mode", "model"], registry=self.registry)
        self.ttft = Histogram("cag_ttft_seconds", "Time to the first token, from the start of the work on "
                              "the question (after its queue)", ["mode", "model"], buckets=_TTFT_BUCKETS,
                              registry=self.registry)
        self.queue = Histogram("cag_queue_seconds", "Time a request waited in its model's queue",
                               ["mode", "model"], buckets=_QUEUE_BUCKETS, registry=self.registry)

    def request(self, endpoint: str, status: int) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        if status >= 400:
            self.errors.labels(endpoint, str(status)).inc()

    def answer(self, mode: str, model: str, ttft_ms: float, queue_ms: float) -> None:
        self.answers.labels(mode, model).inc()
        self.ttft.labels(mode, model).observe(ttft_ms / 1e3)
        self.queue.labels(mode, model).observe(queue_ms / 1e3)

    def render(self) -> bytes:
        return generate_latest(self.registry)
