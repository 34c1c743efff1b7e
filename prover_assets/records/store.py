"""JSONL files that can be trusted: strict reads, resumable appends, atomic publishes.

- Reading is strict: a line that is not UTF-8, not JSON, not a valid record, or repeats a key
  raises `RecordError` naming the file and the line.
- A stream opened for resume tolerates exactly one defect: an unterminated last line (a crash
  mid-write). It is truncated away, counted and logged; everything before it is kept.
- Appends write whole lines, flush and fsync; appending a key already present raises.
- Whole files are published through a temporary file in the same folder, fsynced, renamed.
- Temporaries are named for their writer (`.<name>.<pid>-<random>.tmp`, and staging folders
  `.<name>.staging-<pid>-<random>`): the next publish of the same name, the dead-run reaper and
  `make demo` remove those whose writer is gone (a kill -9 mid-publish), and say so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from prover_assets.records.owned import Removed, size_bytes

__all__ = [
    "Appender",
    "DuplicateKeyError",
    "OutputExistsError",
    "RecordError",
    "follow_records",
    "iter_records",
    "publish_bytes",
    "publish_folder",
    "publish_records",
    "publish_text",
    "read_records",
    "remove_debris",
    "whole_records",
]

log = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)
_FOLLOW_READ = 1 << 24  # bytes a followed stream is read in at a time
KeyOf = Callable[[R], Hashable]


class RecordError(ValueError):
    """A line of a record file is not a valid record; the message names the file and line."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")


class DuplicateKeyError(RecordError):
    """A store holds a key twice; the message names the file and both lines."""

    pass


class OutputExistsError(FileExistsError):
    """A publish would overwrite a complete output."""

    pass


def _default_key(record: BaseModel) -> Hashable:
    return record.key  # type: ignore[attr-defined]


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "record"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _parse_line(path: Path, number: int, raw: bytes, model: type[R]) -> R:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(path, number, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    try:
        # The bytes, not the decoded text: pydantic-core parses bytes about a fifth faster.
        record = model.model_validate_json(raw)
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            raise RecordError(path, number, f"malformed JSON: {_describe(exc)}") from exc
        raise RecordError(path, number, f"invalid {model.__name__}: {_describe(exc)}") from exc
    if "schema_version" in model.model_fields and "schema_version" not in record.model_fields_set:
        raise RecordError(path, number, "missing field schema_version")
    return record


def _lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, terminated) for each line of the file."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            terminated = raw.endswith(b"\n")
            yield number, raw[:-1] if terminated else raw, terminated


def iter_records(path: str | Path, model: type[R], *, key: KeyOf = _default_key) -> Iterator[R]:
    """Every record of the file, in order, validated; raises on the first bad line."""
    path = Path(path)
    seen: set[Hashable] = set()
    for number, raw, terminated in _lines(path):
        if not terminated:
            raise RecordError(
                path,
                number,
                "unterminated last line (a writer crashed mid-write); "
                "reopen the stream for resume to drop it",
            )
        if not raw.strip():
            raise RecordError(path, number, "empty line")
        record = _parse_line(path, number, raw, model)
        record_key = key(record)
        if record_key in seen:
            raise DuplicateKeyError(path, number, f"duplicate key {record_key!r}")
        seen.add(record_key)
        yield record


def follow_records(
    path: str | Path,
    model: type[R],
    stop: threading.Event,
    *,
    poll_s: float = 0.5,
    key: KeyOf = _default_key,
) -> Iterator[R]:
    """Every record of a stream another process is appending to, as each whole line lands,
    validated as `iter_records` does; a line still being written waits for its newline. Ends
    once `stop` is set and what was there then has been read."""
    path = Path(path)
    seen: set[Hashable] = set()
    number, offset, partial = 0, 0, b""
    while True:
        stopping = stop.is_set()  # read once more after it is set: nothing committed is missed
        if path.exists():
            with open(path, "rb") as handle:
                handle.seek(offset)
                # In pieces: the first read of a stream of several GB is the whole file.
                while data := handle.read(_FOLLOW_READ):
                    offset += len(data)
                    *lines, partial = (partial + data).split(b"\n")
                    for raw in lines:
                        number += 1
                        if not raw.strip():
                            raise RecordError(path, number, "empty line")
                        record = _parse_line(path, number, raw, model)
                        if (record_key := key(record)) in seen:
                            raise DuplicateKeyError(path, number, f"duplicate key {record_key!r}")
                        seen.add(record_key)
                        yield record
        if stopping:
            return
        stop.wait(poll_s)


def whole_records(path: str | Path, model: type[R], *, key: KeyOf = _default_key) -> Iterator[R]:
    """Every whole line a stream holds now, validated as `iter_records` does; a last line a
    writer is still writing (or a killed one left) is not read."""
    now = threading.Event()
    now.set()
    return follow_records(path, model, now, key=key)


def read_records(path: str | Path, model: type[R], *, key: KeyOf = _default_key) -> list[R]:
    """Every record of a JSONL store, validated; raises naming the file and line of a bad one."""
    return list(iter_records(path, model, key=key))


_DEBRIS = re.compile(r"^\.(?P<name>.+)\.(?:staging-(?P<staging>\d+)-\w+|(?P<tmp>\d+)-\w+\.tmp)$")


def _writer_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def remove_debris(
    folder: str | Path, *, name: str | None = None, recursive: bool = False
) -> list[Removed]:
    """Remove the temporaries of interrupted publishes (of `name` only, if given) whose writing
    process no longer exists; returns what was removed, with sizes. A live writer's are left
    alone."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    candidates = folder.rglob(".*") if recursive else folder.glob(".*")
    removed = []
    for path in sorted(candidates):
        found = _DEBRIS.match(path.name)
        if found is None or (name is not None and found["name"] != name):
            continue
        if not _writer_gone(int(found["staging"] or found["tmp"])):
            continue
        size = size_bytes(path)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        log.warning("removed %s, left by an interrupted publish", path)
        removed.append(Removed(path, size))
    return removed


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Appender(Generic[R]):
    """A resumable append-only record stream.

    Opening validates what is there (strictly), drops an unterminated last line (counted in
    `torn_dropped`), and remembers every key, so a resumed writer skips finished work and can
    never write a key twice.
    """

    def __init__(self, path: str | Path, model: type[R], *, key: KeyOf = _default_key) -> None:
        self.path = Path(path)
        self.model = model
        self._key = key
        self.keys: dict[Hashable, int] = {}  # key -> its line in the file
        self.torn_dropped = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._recover()
        self._handle = open(self.path, "ab")  # noqa: SIM115 - closed in close()

    def _recover(self) -> None:
        good_bytes = 0
        for number, raw, terminated in _lines(self.path):
            if not terminated:
                log.warning(
                    "%s:%d: dropping an unterminated last line of %d bytes (a writer crashed "
                    "mid-write)",
                    self.path,
                    number,
                    len(raw),
                )
                self.torn_dropped = 1
                break
            record = _parse_line(self.path, number, raw, self.model)
            record_key = self._key(record)
            if record_key in self.keys:
                raise DuplicateKeyError(self.path, number, f"duplicate key {record_key!r}")
            self.keys[record_key] = number
            good_bytes += len(raw) + 1
        if self.torn_dropped:
            with open(self.path, "r+b") as handle:
                handle.truncate(good_bytes)
                handle.flush()
                os.fsync(handle.fileno())

    def __contains__(self, record_key: Hashable) -> bool:
        return record_key in self.keys

    def append_many(self, records: Iterable[R]) -> int:
        """Append whole lines, then flush and fsync once; returns how many were written."""
        lines = []
        batch_keys: dict[Hashable, int] = {}
        for record in records:
            record_key = self._key(record)
            if record_key in self.keys or record_key in batch_keys:
                line = self.keys.get(record_key, 0)
                raise DuplicateKeyError(self.path, line, f"key {record_key!r} is already present")
            batch_keys[record_key] = len(self.keys) + len(batch_keys) + 1
            lines.append(record.model_dump_json().encode("utf-8") + b"\n")
        if not lines:
            return 0
        with naming_the_file(self.path):
            self._handle.write(b"".join(lines))
            self._handle.flush()
            os.fsync(self._handle.fileno())
        self.keys.update(batch_keys)
        return len(lines)

    def append(self, record: R) -> None:
        self.append_many([record])

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Appender[R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@contextlib.contextmanager
def naming_the_file(path: Path) -> Iterator[None]:
    """An OS error while writing `path` names it: a full disk's ENOSPC, raised by a write or an
    fsync on a descriptor, names no file of its own."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc


def publish_bytes(path: str | Path, data: bytes) -> None:
    """Atomically replace `path` with `data`: temp file in the same folder, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_debris(path.parent, name=path.name)
    fd, temp_name = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp", dir=path.parent
    )
    try:
        with naming_the_file(path), os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    _fsync_dir(path.parent)


def publish_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` atomically (a temporary sibling, fsync, rename)."""
    publish_bytes(path, text.encode("utf-8"))


def publish_records(path: str | Path, records: Iterable[BaseModel]) -> int:
    """Atomically write a whole record file; returns the number of records."""
    lines = [record.model_dump_json().encode("utf-8") + b"\n" for record in records]
    publish_bytes(path, b"".join(lines))
    return len(lines)


@contextlib.contextmanager
def publish_folder(destination: str | Path) -> Iterator[Path]:
    """Build a folder in a temporary sibling and rename it into place when the block succeeds.

    Refuses to overwrite: an existing destination raises `OutputExistsError` before any work.
    On failure the temporary folder is removed and the destination never appears.
    """
    destination = Path(destination)
    if destination.exists():
        raise OutputExistsError(f"{destination} already exists; outputs are never overwritten")
    destination.parent.mkdir(parents=True, exist_ok=True)
    remove_debris(destination.parent, name=destination.name)
    staging = Path(
        tempfile.mkdtemp(
            prefix=f".{destination.name}.staging-{os.getpid()}-", dir=destination.parent
        )
    )
    try:
        yield staging
        for file in staging.rglob("*"):
            if file.is_file():
                with open(file, "rb") as handle:
                    os.fsync(handle.fileno())
        if destination.exists():
            raise OutputExistsError(f"{destination} appeared while it was being built")
        os.rename(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(destination.parent)
