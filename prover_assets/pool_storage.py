"""The instance's SQLite storage, with pool-slot claims that two processes cannot both win.

Dagster's SQLite event log claims a slot of a pool as a read followed by a write
(`has_unassigned_slots`, then `add_pending_step`; then a `SELECT ... FOR UPDATE` that SQLite
ignores, then an UPDATE by slot id). Two run workers claiming at the same instant can both read
the one free slot of pool `heavy` and both take it: CI saw two heavy steps run side by side,
and `test_pool_storage.py` fails on the plain storage (figures in its docstring). Postgres locks
the row; SQLite cannot, so every storage call that reads and then writes slot state runs here
under an exclusive `flock` on a file beside the index database. The kernel drops the lock with
its holder, so a kill -9 never leaves it held.

`dagster.yaml` selects `PoolSafeInstance`, whose default storage is this one: Dagster's default
SQLite files in Dagster's default layout, so an existing instance keeps its history.

The instance also makes a run that waits for a slot sleep and stay cancellable, under either of
Dagster's executors (`wait_for_slots_asleep`).
"""

from __future__ import annotations

import fcntl
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import yaml
from dagster import DagsterInstance
from dagster._core.errors import raise_execution_interrupts

# Dagster exports no public names for these: the instance's storage classes are extended here.
from dagster._core.execution.plan.active import ActiveExecution
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.execution.plan.step import ExecutionStep
from dagster._core.instance import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage, _event_logs_directory
from dagster._serdes import ConfigurableClassData

__all__ = [
    "PoolSafeInstance",
    "PoolSafeSqliteEventLogStorage",
    "PoolSafeSqliteStorage",
    "SlotLock",
    "wait_for_slots_asleep",
]

LOCK_FILE = "pool-slots.lock"

Method = TypeVar("Method", bound=Callable[..., Any])


class SlotLock:
    """Exclusive across processes (`flock`), re-entrant within one: a serialised storage call
    may call another, and a second `flock` on a fresh descriptor would wait on itself."""

    def __init__(self, path: Path):
        self.path = path
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._descriptor: int | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._thread_lock:
            if self._depth == 0:
                descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                self._descriptor = descriptor
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._descriptor is not None:
                    os.close(self._descriptor)  # closing the descriptor releases the flock
                    self._descriptor = None


def _under_slot_lock(inherited: Method) -> Method:
    @functools.wraps(inherited)
    def serialised(self: PoolSafeSqliteEventLogStorage, *args: Any, **kwargs: Any) -> Any:
        with self.slot_lock.held():
            return inherited(self, *args, **kwargs)

    return serialised  # type: ignore[return-value]


class PoolSafeSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's SQLite event log; the calls that change pool slots or pending steps are
    serialised across every process of the instance."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        super().__init__(base_dir, inst_data)
        self.slot_lock = SlotLock(Path(self._base_dir) / LOCK_FILE)

    initialize_concurrency_limit_to_default = _under_slot_lock(
        SqliteEventLogStorage.initialize_concurrency_limit_to_default
    )
    set_concurrency_slots = _under_slot_lock(SqliteEventLogStorage.set_concurrency_slots)
    delete_concurrency_limit = _under_slot_lock(SqliteEventLogStorage.delete_concurrency_limit)
    get_pool_limits = _under_slot_lock(SqliteEventLogStorage.get_pool_limits)  # it reconciles
    claim_concurrency_slot = _under_slot_lock(SqliteEventLogStorage.claim_concurrency_slot)
    free_concurrency_slots_for_run = _under_slot_lock(
        SqliteEventLogStorage.free_concurrency_slots_for_run
    )
    free_concurrency_slot_for_step = _under_slot_lock(
        SqliteEventLogStorage.free_concurrency_slot_for_step
    )


class PoolSafeSqliteStorage(DagsterSqliteStorage):
    """Dagster's default SQLite storage (same files, same layout) with the pool-safe event log."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        # Dagster's constructor builds its own event log first; replacing it costs a mkdir and
        # keeps every other storage exactly as Dagster builds it.
        super().__init__(base_dir, inst_data)
        self._event_log_storage = PoolSafeSqliteEventLogStorage(_event_logs_directory(base_dir))

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData, config_value: dict[str, str]
    ) -> PoolSafeSqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)


def _seconds_to_next_claim_check(context: InstanceConcurrencyContext) -> float:
    """Until the earliest pending claim may be tried again (0 when one is due). Dagster's own
    returns `min([0, ...])`, never more than 0 (dagster-io/dagster#20367, closed unmerged)."""
    if not context.has_pending_claims():
        return 0.0
    now = time.time()
    return max(0.0, min(ready_at - now for ready_at in context._pending_timeouts.values()))


_DAGSTERS_STEPS_TO_EXECUTE = ActiveExecution.get_steps_to_execute


def _steps_to_execute_or_sleep(
    active: ActiveExecution, limit: int | None = None
) -> Sequence[ExecutionStep]:
    """The steps ready to run; when there are none and none is running (the run waits for a
    pool slot or a retry), first a sleep until the next claim check, during which a
    termination request (SIGTERM or SIGINT) raises as it does inside a step. Both of Dagster's
    executors loop on this without sleeping while they wait (the in-process one checks for a
    termination only inside a step, so a waiting run could not be cancelled)."""
    steps = _DAGSTERS_STEPS_TO_EXECUTE(active, limit)
    if not steps and not active._in_flight:
        with raise_execution_interrupts():
            seconds = active.sleep_interval()
            if seconds > 0:
                time.sleep(seconds)
    return steps


def wait_for_slots_asleep() -> None:
    """Make Dagster's executors wait for a pool slot asleep and cancellable. Without it a run
    blocked by pool `heavy` spun a core (8 min 54 s of CPU in 21 min of waiting) and ignored
    "Terminate". Idempotent; applied by every `PoolSafeInstance`."""
    InstanceConcurrencyContext.interval_to_next_pending_claim_check = _seconds_to_next_claim_check
    ActiveExecution.get_steps_to_execute = _steps_to_execute_or_sleep


class PoolSafeInstance(DagsterInstance):
    """Dagster's instance whose default storage is the pool-safe one, rooted where Dagster roots
    its own (DAGSTER_HOME, the folder given to `DagsterInstance.from_config`, or the temporary
    home of `dagster dev`): a `storage` block in dagster.yaml would need a fixed path. Runs on
    it wait for a pool slot asleep and cancellable (`wait_for_slots_asleep`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        wait_for_slots_asleep()
        super().__init__(*args, **kwargs)

    @classmethod
    def config_schema(cls) -> dict[str, Any]:
        return {}

    @staticmethod
    def config_defaults(base_dir: str) -> Mapping[str, ConfigurableClassData | None]:
        storage = ConfigurableClassData(
            __name__, PoolSafeSqliteStorage.__name__, yaml.dump({"base_dir": base_dir})
        )
        return {**InstanceRef.config_defaults(base_dir), "storage": storage}
