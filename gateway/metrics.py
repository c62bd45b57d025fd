"""What `/metrics` shows, in the Prometheus text format (prometheus-client).

`Metrics` holds every metric of one bot in the `CollectorRegistry` it is
given (the composition root makes one per bot; tests never use the global
default registry). The parts that do the work know nothing of Prometheus:
they call a plain callback (`record_turn`, `model_call_recorder`), and the
queue depths are read when `/metrics` is asked (`refresh`).

Metric names (the counters gain ``_total`` in the output):
  mnemo_turns{platform, outcome}            turns run: replied, no_reply, stopped
  mnemo_turn_seconds{platform}              a turn from the message to the end of its reply
  mnemo_model_calls{client}                 model requests (main or auxiliary), retries each
  mnemo_model_errors{client, error}         those that failed, by error class
  mnemo_model_call_seconds{client}          one model request
  mnemo_session_queue_depth{platform}       messages waiting for a busy session
  mnemo_background_jobs{state}              background jobs scheduled or running
  mnemo_adapter_ready{platform}             1 while the adapter is connected
  mnemo_memory_writes_dropped{job, verdict} entries about a person dropped as not grounded
                                            in their words (job: turn, review, extraction)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

TURN_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
MODEL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

ModelCallRecorder = Callable[[float, "BaseException | None"], None]
"""Called once per model request: its seconds, and the error that ended it (None: ok)."""


class Metrics:
    """Every metric of one bot, registered in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._turns = Counter(
            "mnemo_turns", "Turns run", ["platform", "outcome"], registry=registry
        )
        self._turn_seconds = Histogram(
            "mnemo_turn_seconds",
            "Seconds from a person's message to the end of its reply",
            ["platform"],
            buckets=TURN_BUCKETS,
            registry=registry,
        )
        self._model_calls = Counter(
            "mnemo_model_calls", "Model requests", ["client"], registry=registry
        )
        self._model_errors = Counter(
            "mnemo_model_errors", "Model requests that failed", ["client", "error"],
            registry=registry,
        )  # fmt: skip
        self._model_seconds = Histogram(
            "mnemo_model_call_seconds",
            "Seconds of one model request",
            ["client"],
            buckets=MODEL_BUCKETS,
            registry=registry,
        )
        self._queue = Gauge(
            "mnemo_session_queue_depth",
            "Messages waiting for their busy session",
            ["platform"],
            registry=registry,
        )
        self._jobs = Gauge("mnemo_background_jobs", "Background jobs", ["state"], registry=registry)
        self._ready = Gauge(
            "mnemo_adapter_ready", "1 while the adapter is connected", ["platform"],
            registry=registry,
        )  # fmt: skip
        self._dropped = Counter(
            "mnemo_memory_writes_dropped",
            "Entries about a person dropped as not grounded in their words",
            ["job", "verdict"],
            registry=registry,
        )

    def record_dropped(self, job: str, verdict: str) -> None:
        """An entry about a person was dropped: their words did not ground it (`verdict`)."""
        self._dropped.labels(job, verdict).inc()

    def record_turn(self, platform: str, outcome: str, seconds: float) -> None:
        """One turn of `platform` ended: "replied", "no_reply" (a fault) or "stopped"."""
        self._turns.labels(platform, outcome).inc()
        self._turn_seconds.labels(platform).observe(seconds)

    def model_call_recorder(self, client: str) -> ModelCallRecorder:
        """The callback a model client of `client` ("main", "auxiliary") reports to."""

        def record(seconds: float, error: BaseException | None) -> None:
            self._model_calls.labels(client).inc()
            self._model_seconds.labels(client).observe(seconds)
            if error is not None:
                self._model_errors.labels(client, type(error).__name__).inc()

        return record

    def refresh(
        self,
        queued: Iterable[tuple[str, int]],
        jobs: Iterable[bool],
        ready: Iterable[tuple[str, bool]],
    ) -> None:
        """Set the gauges: `queued` (platform, messages waiting), `jobs` (running? for each
        background job), `ready` (platform, connected?)."""
        for platform, depth in queued:
            self._queue.labels(platform).set(depth)
        running = list(jobs)
        self._jobs.labels("running").set(sum(running))
        self._jobs.labels("scheduled").set(len(running) - sum(running))
        for platform, connected in ready:
            self._ready.labels(platform).set(1 if connected else 0)

    def text(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
