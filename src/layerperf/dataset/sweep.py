"""The sweep: the configurations not yet in the store, measured by an executor, each written as it finishes.

An executor measures configurations somewhere — :class:`~layerperf.dataset.local.LocalExecutor` in a
worker process here, :class:`~layerperf.dataset.ray_runner.RayExecutor` as Ray tasks, one per node
at a time — and hands each result back to this loop, in the driver, which alone writes the store:
one transaction per configuration (:meth:`~layerperf.dataset.store.Store.write`). An interrupt stops
the loop between two writes or inside one (rolled back); what was written stays.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from layerperf.dataset.config import Config
from layerperf.dataset.fingerprint import Fingerprint
from layerperf.dataset.measure import ConfigResult
from layerperf.dataset.store import Store


class Executor(Protocol):
    """Where configurations are measured."""

    def free(self) -> int:
        """How many more configurations may be in flight now."""
        ...

    def submit(self, cfg: Config) -> None:
        ...

    def wait(self) -> list[ConfigResult]:
        """Block until at least one configuration in flight has finished; their results."""
        ...

    def close(self) -> None:
        ...


@dataclass(slots=True)
class Tally:
    """What a sweep did: configurations planned, already in the store, measured ok, failed, flagged (too
    few clean runs: measured during a host slow-down, or with the CPU taken by others throughout), and
    the slowed and disturbed runs set aside from the others."""

    planned: int = 0
    skipped: int = 0
    skipped_failed: int = 0  # of those skipped, the ones the store holds failed (--retry-failed measures them)
    ok: int = 0
    failed: int = 0
    flagged: int = 0
    slowed_runs: int = 0
    disturbed_runs: int = 0

    def add(self, r: ConfigResult) -> None:
        if r.status == "ok":
            self.ok += 1
        else:
            self.failed += 1
        if r.slowed_used or r.disturbed_used:  # every run kept: flagged, none set aside
            self.flagged += 1
            return
        self.slowed_runs += r.runs_slowed or 0
        self.disturbed_runs += r.runs_disturbed or 0


def pending(configs: Sequence[Config], store: Store, retry_failed: bool = False) -> list[Config]:
    """The configurations the store does not hold yet (with ``retry_failed``, also those it holds failed)."""
    held = store.statuses()
    return [c for c in configs if c.key() not in held or (retry_failed and held[c.key()] == "failed")]


def changed_models(skipped: Sequence[Config], store: Store) -> list[tuple[str, str, str]]:
    """(model, SHA-256 the store measured, SHA-256 now) of each model file among ``skipped`` (configurations
    the store holds) whose content changed since: a configuration is keyed by the file's path, so the new
    file would be skipped as measured."""
    from layerperf.models.extdata import sha256  # lazy: hashing only where a resumed sweep has model files

    out = []
    for model in dict.fromkeys(c.model for c in skipped):
        path = Path(model)
        if not path.is_file():
            continue
        row = store.db.execute("SELECT l.model_sha256 FROM configs c JOIN layers l USING (config_id) "
                               "WHERE c.model = ? AND c.status = 'ok' AND l.model_sha256 IS NOT NULL LIMIT 1",
                               (model,)).fetchone()
        if row is not None and row[0] != (now := sha256(path)):
            out.append((model, str(row[0]), now))
    return out


def other_hardware(store: Store, here: Iterable[Fingerprint]) -> list[tuple[Fingerprint, Fingerprint]]:
    """(a machine of the store, this one) for each fingerprint in ``here`` whose hardware none of the store's
    machines has, while the store has some: measurements from two machines do not compare."""
    held = store.fingerprints()
    known = {f.hardware() for f in held}
    return [(held[0], f) for f in here if held and f.hardware() not in known]


def run(todo: Sequence[Config], store: Store, executor: Executor, *,
        started: Callable[[Config], None] | None = None,
        finished: Callable[[ConfigResult, bool], None] | None = None) -> Tally:
    """Measure ``todo`` on ``executor``, writing each result to ``store`` as it comes. ``started(cfg)`` and
    ``finished(result, written)`` report progress; ``written`` is False where the store already held it."""
    tally = Tally(planned=len(todo))
    queue = deque(todo)
    in_flight = 0
    try:
        while queue or in_flight:
            while queue and executor.free() > 0:
                cfg = queue.popleft()
                executor.submit(cfg)
                in_flight += 1
                if started:
                    started(cfg)
            for result in executor.wait():
                in_flight -= 1
                written = store.write(result)
                tally.add(result)
                if finished:
                    finished(result, written)
    finally:
        executor.close()
    return tally
