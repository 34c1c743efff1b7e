"""vLLM on every GPU it is given: one in-process engine child per model slice.

The GPUs of `gpu.settings.gpus` are cut into slices of `tensor_parallel_size x
pipeline_parallel_size`; each slice gets its own child process
(`python -m prover_assets.generation.vllm_child`, its own `CUDA_VISIBLE_DEVICES`, its own folder
`engine-<i>` and log) holding one `vllm.LLM`. Requests are dealt to the slices in turn; every
child streams its results as each finishes, and the parent yields them as they land. A child
that dies (a crash, an OOM, a load that never ends) loses only its unanswered requests: they go
to a slice whose child finished cleanly, on a new child, and a dead slice is not used again,
except that a child that exits before its model is loaded is started once more on its slice
(starts race: compile caches, memory). Each slice has its own vLLM cache (`VLLM_CACHE_ROOT`,
torch.compile's artifacts among them) under the user's, so children starting at once never
write one compile cache together (vLLM issue #24601); each slice's start-up (spawn to model
loaded) is measured and described. A
sample's tokens depend only on its prompt, seed and sampling (vLLM's per-request seeds), never
on which slice drew it; `batch_invariant` makes that exact across batch compositions too.

Each child is health-checked before it counts: it writes `ready.json` once its model is loaded,
naming the folder vLLM loaded and that folder's revision, and the parent refuses a child that
serves another model than the step's. Children are started by the step and stopped when it ends
or dies (tied children), so a step that samples another model (the exported candidate) gets
engines serving it with no person in the loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prover_assets.children import forget_child, spawn_tied
from prover_assets.generation.engines import (
    GenerationEngine,
    GenerationRequest,
    GenerationResult,
)
from prover_assets.generation.vllm_child import READY_FILE, VllmSpec, write_spec

__all__ = ["EngineIdentityError", "VllmEngine", "gpu_slices", "slice_cache_root"]

log = logging.getLogger(__name__)


class EngineIdentityError(RuntimeError):
    """An engine child that serves another model than the step samples."""


def slice_cache_root(index: int) -> str:
    """Slice `index`'s own vLLM cache, under the user's (`VLLM_CACHE_ROOT`, else ~/.cache/vllm):
    kept between steps, never shared by two children."""
    base = os.environ.get("VLLM_CACHE_ROOT") or os.path.join(
        os.path.expanduser("~"), ".cache", "vllm"
    )
    return os.path.join(base, f"prover-assets-slice-{index}")


def gpu_slices(gpus: Sequence[int], gpus_per_engine: int) -> list[tuple[int, ...]]:
    """`gpus` cut into consecutive slices of `gpus_per_engine` (one engine each)."""
    if not gpus or len(gpus) % gpus_per_engine:
        raise ValueError(
            f"{len(gpus)} GPUs {list(gpus)} do not split into engines of {gpus_per_engine} "
            "(tensor_parallel_size x pipeline_parallel_size)"
        )
    return [tuple(gpus[i : i + gpus_per_engine]) for i in range(0, len(gpus), gpus_per_engine)]


@dataclass
class _Child:
    """One engine child: its slice, its requests, its process and where it writes."""

    slice_index: int
    requests: list[GenerationRequest]
    process: subprocess.Popen[bytes]
    run: Path
    log_path: Path
    started: float = field(default_factory=time.monotonic)
    ready: bool = False
    buffer: str = ""
    offset: int = 0

    def new_rows(self) -> list[dict[str, Any]]:
        """The whole result lines written since the last call."""
        with open(self.run / "results.jsonl", encoding="utf-8") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
            self.offset = handle.tell()
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split("\n")
        return [json.loads(line) for line in lines]

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        forget_child(self.process)


class VllmEngine(GenerationEngine):
    """`vllm.LLM` children, one per GPU slice (see the module docstring). Requests and results
    travel as JSON lines through files; each child's process group is signalled at the end
    (vLLM's engine process can outlive its parent and hold its pipes)."""

    name = "vllm"

    def __init__(
        self,
        spec: VllmSpec,
        *,
        workdir: Path,
        gpus: Sequence[int] = (0,),
        batch_invariant: bool = False,
        load_timeout_s: float = 3600.0,
        poll_s: float = 0.5,
        exit_grace_s: float = 30.0,
    ) -> None:
        self.spec = spec
        self.workdir = workdir
        self.slices = gpu_slices(gpus, spec.tensor_parallel_size * spec.pipeline_parallel_size)
        self.batch_invariant = batch_invariant
        self.load_timeout_s = load_timeout_s
        self.poll_s = poll_s
        self.exit_grace_s = exit_grace_s
        self.dead_slices: list[int] = []
        self.served_per_slice = [0] * len(self.slices)
        self.start_retries = [0] * len(self.slices)
        self.startup_s_per_slice: list[float | None] = [None] * len(self.slices)

    def describe(self) -> dict[str, Any]:
        spec = {k: v for k, v in asdict(self.spec).items() if k != "chunk"}
        return {
            "engine": self.name,
            **spec,
            "gpu_slices": [list(s) for s in self.slices],
            "batch_invariant": self.batch_invariant,
            "served_per_slice": list(self.served_per_slice),
            "dead_slices": list(self.dead_slices),
            "start_retries": list(self.start_retries),
            "startup_s_per_slice": [
                None if s is None else round(s, 1) for s in self.startup_s_per_slice
            ],
        }

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        if not requests:
            return
        live = [i for i in range(len(self.slices)) if i not in self.dead_slices]
        if not live:
            raise RuntimeError(f"no vLLM engine left: GPU slices {self.dead_slices} failed")
        unanswered = {r.key: r for r in requests}
        children, free = self._deal(list(requests), live)
        orphans: list[GenerationRequest] = []
        try:
            while unanswered:
                landed = 0
                for child in list(children):
                    exited = child.process.poll() is not None  # before reading: none missed
                    for result in self._results(child):
                        if unanswered.pop(result.key, None) is not None:
                            landed += 1
                            self.served_per_slice[child.slice_index] += 1
                            yield result
                    left = self._ended(child, unanswered, exited=exited)
                    if left is None:
                        continue
                    children.remove(child)
                    orphans += left
                    if child.slice_index not in self.dead_slices:
                        free.append(child.slice_index)
                if orphans and free:
                    started, free = self._deal(orphans, free)
                    children += started
                    orphans = []
                if orphans and not children:
                    raise RuntimeError(
                        f"every vLLM engine died ({len(unanswered)} of {len(requests)} samples "
                        f"unanswered; GPU slices {self.dead_slices} failed); see the vllm.log of "
                        f"each {self.workdir}/engine-<i>; the samples already committed are "
                        "kept, run again to resume"
                    )
                if not landed:
                    time.sleep(self.poll_s)
            self._settle(children)
        finally:
            for child in children:
                child.stop()

    def _settle(self, children: list[_Child]) -> None:
        """Every request answered: let each child end by itself (up to `exit_grace_s` in all)
        and count one that ends non-zero dead, as if it had ended before its last answer was
        read: a teardown that fails may leave its GPUs unusable for the next step's child."""
        deadline = time.monotonic() + self.exit_grace_s
        for child in children:
            try:
                child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                continue  # still tearing down: stopped, not judged
            if child.process.returncode != 0 and child.slice_index not in self.dead_slices:
                self.dead_slices.append(child.slice_index)
                log.warning(
                    "vLLM engine %d ended with %s after answering every request; its slice is "
                    "not used again; see %s",
                    child.slice_index,
                    child.process.returncode,
                    child.log_path,
                )

    def _deal(
        self, requests: list[GenerationRequest], slices: list[int]
    ) -> tuple[list[_Child], list[int]]:
        """`requests` dealt to `slices` in turn, a child started on each slice with a share:
        (the children, the slices left idle)."""
        children, idle = [], []
        for turn, index in enumerate(slices):
            share = requests[turn :: len(slices)]
            if share:
                children.append(self._start(index, share))
            else:
                idle.append(index)
        return children, idle

    def _start(self, slice_index: int, requests: list[GenerationRequest]) -> _Child:
        folder = self.workdir / f"engine-{slice_index}"
        folder.mkdir(parents=True, exist_ok=True)
        run = Path(tempfile.mkdtemp(prefix="vllm-run-", dir=folder))
        write_spec(run, self.spec)
        with open(run / "requests.jsonl", "w", encoding="utf-8") as handle:
            for r in requests:
                row = {
                    "key": list(r.key),
                    "prompt_ids": list(r.prompt_ids),
                    "max_tokens": r.max_tokens,
                    "seed": r.seed,
                }
                handle.write(json.dumps(row) + "\n")
        (run / "results.jsonl").touch()
        env = {
            **os.environ,
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in self.slices[slice_index]),
            "VLLM_CACHE_ROOT": slice_cache_root(slice_index),
        }
        if self.batch_invariant:
            env["VLLM_BATCH_INVARIANT"] = "1"
        log_path = folder / "vllm.log"
        with open(log_path, "ab") as log_file:
            process = spawn_tied(
                [sys.executable, "-m", "prover_assets.generation.vllm_child", str(run)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        log.info(
            "vLLM engine %d on GPUs %s: %d requests (%s)",
            slice_index,
            env["CUDA_VISIBLE_DEVICES"],
            len(requests),
            log_path,
        )
        return _Child(slice_index, requests, process, run, log_path)

    def _results(self, child: _Child) -> Iterator[GenerationResult]:
        if not child.ready:
            self._check_ready(child)
        for row in child.new_rows():
            yield GenerationResult(
                tuple(row["key"]),
                tuple(row["completion_ids"]),
                row["completion_text"],
                row["finish_reason"],
                row["sampling"],
            )

    def _check_ready(self, child: _Child) -> None:
        """Once the child has loaded its model: the folder it serves and that folder's revision
        must be the step's, or the step stops (samples of another model are never mixed in)."""
        ready_path = child.run / READY_FILE
        if not ready_path.exists():
            return
        ready = json.loads(ready_path.read_text(encoding="utf-8"))
        served = os.path.realpath(ready["model_path"])
        expected = os.path.realpath(self.spec.model_path)
        if (served, ready["model_rev"]) != (expected, self.spec.model_rev):
            raise EngineIdentityError(
                f"vLLM engine {child.slice_index} serves {served} at revision "
                f"{ready['model_rev']}, but this step samples {expected} at revision "
                f"{self.spec.model_rev}; see {child.log_path}"
            )
        child.ready = True
        startup = time.monotonic() - child.started
        self.startup_s_per_slice[child.slice_index] = startup
        log.info(
            "vLLM engine %d is serving %s (%s), %.1f s after it was started",
            child.slice_index,
            served,
            ready["model_rev"],
            startup,
        )

    def _ended(
        self, child: _Child, unanswered: dict[tuple, GenerationRequest], *, exited: bool
    ) -> list[GenerationRequest] | None:
        """None while the child works; once it has ended (`exited` before its results were
        read), its requests left unanswered: empty when it finished them all. A child still
        loading its model after the load timeout is ended."""
        loading_too_long = (
            not child.ready and time.monotonic() - child.started > self.load_timeout_s
        )
        if not exited and not loading_too_long:
            return None
        if loading_too_long:
            log.warning(
                "vLLM engine %d did not load its model in %.0f s; stopping it",
                child.slice_index,
                self.load_timeout_s,
            )
        child.stop()
        left = [r for r in child.requests if r.key in unanswered]
        if exited and not child.ready and not self.start_retries[child.slice_index]:
            self.start_retries[child.slice_index] += 1
            log.warning(
                "vLLM engine %d exited (%s) before its model was loaded; starting it once more; "
                "see %s",
                child.slice_index,
                child.process.returncode,
                child.log_path,
            )
            return left
        if left or child.process.returncode != 0:
            self.dead_slices.append(child.slice_index)
            log.warning(
                "vLLM engine %d (GPUs %s) ended with %s leaving %d of %d requests; they go to "
                "another engine; see %s",
                child.slice_index,
                ",".join(str(g) for g in self.slices[child.slice_index]),
                child.process.returncode,
                len(left),
                len(child.requests),
                child.log_path,
            )
        return left
