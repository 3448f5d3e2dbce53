"""The three tracing setups of ``run.py --only tracing``, made in a ``bench_calls.py``
worker (``--tracing MODE``) before it imports the supervisor.

* ``none``: ``opentelemetry`` cannot be imported (a ``sys.meta_path`` finder refuses
  it). For our code this is an install without the ``otel`` extra: the only import of
  it, ``supervisor/runtime/otel.py`` at ``Supervisor.open``, fails and traces stay
  off; the one difference, how long that failed import takes, is paid once per open.
* ``idle``: the extra importable, no tracer provider set: traces stay off.
* ``batch``: an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` (its defaults,
  as a host would have it) over an exporter that does nothing, set as the global
  provider: every call makes its spans.

``Tracing.report`` says what the worker saw: whether ``opentelemetry`` was loaded,
whether the supervisor's traces were on, and (``batch``) the spans made per measured
call, exported or dropped by a full queue.
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
from collections import Counter
from collections.abc import Sequence
from types import ModuleType
from typing import Any

MODES = ("none", "idle", "batch")


class _Refused(importlib.abc.MetaPathFinder):
    """Refuses ``opentelemetry`` and its submodules, as if it were not installed."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r} (refused by the benchmark)", name=name)


class _Drops(logging.Handler):
    """Counts the batch processor's ``Queue full`` warnings: one per span dropped."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Queue full"):
            self.count += 1


class Tracing:
    """One worker's tracing setup, and what it saw."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise SystemExit(f"--tracing {mode}: one of {', '.join(MODES)}")
        if any(name == "opentelemetry" or name.startswith("opentelemetry.") for name in sys.modules):
            raise SystemExit("opentelemetry was imported before the tracing setup")
        self.mode = mode
        self.exported = 0
        self.names: Counter[str] = Counter()
        self._drops = _Drops()
        self._provider: Any = None
        self._mark = 0
        if mode == "none":
            sys.meta_path.insert(0, _Refused())
        elif mode == "batch":
            self._provider = self._install()

    def _install(self) -> Any:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        counted = self

        class NoOpExporter(SpanExporter):
            """Exports nothing; counts the spans (and names those of its first batch)."""

            def export(self, spans: Sequence[Any]) -> SpanExportResult:
                if not counted.names:
                    counted.names.update(span.name for span in spans)
                counted.exported += len(spans)
                return SpanExportResult.SUCCESS

        logging.getLogger("opentelemetry.sdk._shared_internal").addHandler(self._drops)
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(NoOpExporter()))
        trace.set_tracer_provider(provider)
        return provider

    def _made(self) -> int:
        """Spans ended so far: exported (after a flush) or dropped."""
        if self._provider is None:
            return 0
        self._provider.force_flush()
        return self.exported + self._drops.count

    def start(self) -> None:
        """The measured calls begin: spans made from here on are theirs."""
        self._mark = self._made()

    def report(self, calls: int) -> dict[str, Any]:
        """What the worker saw, with the supervisor open (``calls``: those measured)."""
        made = self._made() - self._mark
        seen: dict[str, Any] = {
            "mode": self.mode,
            "opentelemetry_loaded": "opentelemetry" in sys.modules,
            "traces_on": _traces_on(),
        }
        if self._provider is not None:
            seen.update(
                spans_per_call=made / calls,
                spans_exported=self.exported,
                spans_dropped=self._drops.count,
                span_names=", ".join(f"{name}: {count}" for name, count in sorted(self.names.items())),
            )
        return seen

    def close(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()


def _traces_on() -> bool | None:
    """Whether the supervisor switched its traces on (None: its module has moved)."""
    try:
        from supervisor.runtime.tracing import TRACING
    except ImportError:
        return None
    return TRACING.active is not None
