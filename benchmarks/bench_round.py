"""Benchmark: the wall time of a round, sequential against overlapped, on 1 to 8 GPUs
(SYNTHETIC).

Generation goes through timing doubles of vLLM's engine, one per GPU as `VllmEngine` runs one
child per GPU slice (continuous batching with --max-num-seqs slots, 341 tokens/s per GPU when
every slot decodes: the seed system's measured 1,363 tokens/s at TP=4, taken as four GPUs'
worth), verification through the product's verifier and Lean worker pool to the REPL double,
which sleeps for each proof's service time (the seed system's mix: log-normal, median 2.5 s,
p90 38.6 s, capped at the 180 s budget). Everything runs through the product's steps
(materialize_generations, materialize_verdicts beside it as the overlapped pair's verify op
runs, correction_samples),
time divided by --scale, the problem counts scaled down (defaults below).

Two jobs: the baseline (miniF2F and MOBench at cap 16,384; independent stages) and the pool
round (round 0, verify with feedback, the correction round on round 0's failures, verify).

- sequential: today's exclusive shape, every step in turn;
- overlapped: a GPU lane and a Lean lane, as the multiprocess executor runs pools `gpu` and
  `lean`: each pair's verify step starts with its generation step (when the Lean lane is free)
  and judges each sample as it is committed, finishing once the generation has; a correction
  round waits for the verdicts it corrects;
- lower bound: per dependency layer, the larger of its GPU time and its Lean time (both as the
  sequential run measured them) plus a tail (the Lean time of one proof: the last sample can
  only be verified once it exists), summed over layers.

The completion-length mix is an assumption (log-normal, median 6,000 tokens, p90 at the cap):
the seed's measured mix is not in this repository. So is the duplicate rate (--duplicate-rate of
samples repeat an earlier sample of the same problem): the only real proofs here (the
kimina-lean-server fixtures) are one per problem, so a within-problem rate cannot be measured.

With --engines 1,2,4,8 (the default) the overlapped shape runs with each number of engines and
a table sets its wall time against max(GPU time / N, Lean time) per layer, naming where the
Lean pool becomes the bottleneck.

    python benchmarks/bench_round.py [--scale 100] [--workers 8] [--seed 0] [--engines 1,2,4,8]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prover_assets.generation.engines import (
    EngineOpening,
    GenerationEngine,
    GenerationRequest,
    GenerationResult,
)
from prover_assets.generation.stages import (
    GENERATIONS_FILE,
    Samples,
    correction_samples,
    materialize_generations,
    round0_samples,
)
from prover_assets.records import SamplingSettings, publish_records
from prover_assets.verify.backends import LocalReplBackend
from prover_assets.verify.cache import VerdictCache
from prover_assets.verify.stages import (
    VERDICTS_FILE,
    GenerationOutcome,
    SiblingGeneration,
    lean_workers_lease,
    materialize_verdicts,
)
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.doubles.step_engine import ContinuousBatchingDouble
from prover_assets_tests.factories import make_pins, make_problem
from prover_assets_tests.lean_double import DOUBLE

TOKENS_PER_S = 1363.0  # the seed system's generation rate at TP=4, every slot decoding
TOKENS_PER_GPU_S = TOKENS_PER_S / 4  # per GPU, taking TP=4 as four GPUs' worth (assumed)
CAP = 16384
MEDIAN_TOKENS, P90_TOKENS = 6000.0, float(CAP)
MEDIAN_S, P90_S, BUDGET_S = 2.5, 38.6, 180.0
Z90 = 1.2815515655446004
ACCEPT_SHARE = 0.4  # of the samples of a problem the prover can solve
SOLVABLE_SHARE = 0.5  # of the problems (the rest are never solved: the correction round's)
SIGNATURE = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by"
SAMPLING = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)
RULES = "repl_rules.json"


def _unit(*parts: object) -> float:
    """A uniform draw in (0, 1) from the parts: the same sample gets the same draw in every
    shape and on every resume."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2**64


def _lognormal(u: float, median: float, p90: float) -> float:
    from statistics import NormalDist

    sigma = (math.log(p90) - math.log(median)) / Z90
    return math.exp(math.log(median) + sigma * NormalDist().inv_cdf(u))


@dataclass(frozen=True)
class Workload:
    seed: int
    scale: float
    duplicate_rate: float

    def origin(self, key: tuple) -> tuple:
        """The sample whose proof this one repeats (itself unless it is a duplicate)."""
        problem_id, sample_idx, round, _ = key
        if sample_idx and _unit(self.seed, "dup", *key) < self.duplicate_rate:
            return (problem_id, 0, round)
        return (problem_id, sample_idx, round)

    def tokens(self, key: tuple) -> int:
        return max(16, int(_lognormal(_unit(self.seed, "len", *key), MEDIAN_TOKENS, P90_TOKENS)))

    def service_s(self, origin: tuple) -> float:
        """The proof's Lean time, unscaled (the budget when it is a timeout)."""
        return min(_lognormal(_unit(self.seed, "svc", *origin), MEDIAN_S, P90_S), BUDGET_S)

    def accepted(self, origin: tuple) -> bool:
        solvable = _unit(self.seed, "solvable", origin[0]) < SOLVABLE_SHARE
        return solvable and _unit(self.seed, "ok", *origin) < ACCEPT_SHARE

    def completion(self, key: tuple) -> str:
        """The sample's text: a proof tagged with the sample it repeats (the REPL double's rule
        for the tag gives its service time and its verdict)."""
        origin = self.origin(key)
        tactic = "omega" if self.accepted(origin) else "nlinarith"
        body = f"  have {_tag(origin)} : True := trivial\n  {tactic}"
        return f"Plan.\n```lean4\n{SIGNATURE}\n{body}\n```"

    def rules(self, origins: Sequence[tuple]) -> list[dict[str, Any]]:
        """The REPL double's rule for every proof: sleep its service time (hang past the budget:
        a timeout), then Lean's answer (an error at `nlinarith` for a failing proof)."""
        rules = []
        for origin in origins:
            service = self.service_s(origin)
            rule: dict[str, Any] = {"match": {"substring": _tag(origin) + " "}}
            if service >= BUDGET_S:
                rule.update(action="hang")
            else:
                rule.update(action="delay", argument=f"{service / self.scale:.6f}")
            if not self.accepted(origin):
                rule["messages_at"] = [{"at": "nlinarith", "data": "linarith failed"}]
            rules.append(rule)
        return rules


def _tag(origin: tuple) -> str:
    problem_id, sample_idx, round = origin
    return f"tag_{problem_id.replace('-', '_')}_{sample_idx}_{round}"


class WordTokenizer:
    """The prompt side of a tokenizer, enough for the runner to render and count prompts."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True) -> str:
        return "\n".join(m["content"] for m in messages)

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [len(word) for word in text.split()][:512]}


class TimedEngine(GenerationEngine):
    """SIMULATED generation: `engines` vLLM engines (one per GPU, each the step double of
    continuous batching at the per-GPU rate) in real time, scaled; requests dealt to them in
    turn, as `VllmEngine` deals them to its GPU slices."""

    name = "timed double"

    def __init__(
        self, workload: Workload, max_num_seqs: int, busy: list[float], engines: int = 1
    ) -> None:
        self.workload = workload
        self.max_num_seqs = max_num_seqs
        self.busy = busy  # GPU seconds (scaled) of every generate call, for the report
        self.engines = engines
        self.longest_s = 0.0  # the longest sample's decode time alone: no split shortens it

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "engines": self.engines, "max_num_seqs": self.max_num_seqs}

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        by_id = {str(i): r for i, r in enumerate(requests)}
        doubles = [
            ContinuousBatchingDouble(
                lambda request_id, prompt, params: self.workload.tokens(by_id[request_id].key),
                self.max_num_seqs,
                step_s=self.max_num_seqs / TOKENS_PER_GPU_S / self.workload.scale,
            )
            for _ in range(self.engines)
        ]
        step_s = doubles[0].step_s
        for request_id, request in by_id.items():
            tokens = min(self.workload.tokens(request.key), request.max_tokens)
            self.longest_s = max(self.longest_s, tokens * step_s)
            doubles[int(request_id) % self.engines].add_request(
                request_id, None, {"max_tokens": request.max_tokens, "output_kind": "FINAL_ONLY"}
            )
        started = time.monotonic()
        # each engine's next finish, earliest first: the engines decode side by side
        upcoming = [(d.advance(), d) for d in doubles if d.has_unfinished_requests()]
        try:
            while upcoming:
                upcoming.sort(key=lambda pair: pair[1].now_s)
                outputs, double = upcoming.pop(0)
                time.sleep(max(0.0, started + double.now_s - time.monotonic()))
                for output in outputs:
                    yield self._result(by_id[output.request_id], output.outputs[0])
                if double.has_unfinished_requests():
                    upcoming.append((double.advance(), double))
        finally:
            self.busy.append(sum(d.now_s for d in doubles))

    def _result(self, request: GenerationRequest, completion: Any) -> GenerationResult:
        text = self.workload.completion(request.key) if completion.finish_reason == "stop" else "…"
        return GenerationResult(
            request.key, completion.token_ids, text, completion.finish_reason, SAMPLING.carried()
        )


@dataclass(frozen=True)
class Stage:
    name: str
    samples: Callable[[Path], Samples]
    feedback: bool
    after: str | None = None  # the stage whose verdicts this one's samples come from


@dataclass
class Measured:
    wall_s: float = 0.0
    gpu_s: dict[str, float] = field(default_factory=dict)
    longest_s: dict[str, float] = field(default_factory=dict)  # one sample's decode, alone
    lean_s: dict[str, float] = field(default_factory=dict)
    proofs: dict[str, int] = field(default_factory=dict)
    cached: int = 0
    verdicts: int = 0
    streamed: int = 0
    judgements: dict[str, set] = field(default_factory=dict)


class Bench:
    def __init__(
        self, root: Path, workload: Workload, workers: int, max_num_seqs: int, engines: int = 1
    ) -> None:
        self.root = root
        self.engines = engines
        self.workload = workload
        self.workers = workers
        self.max_num_seqs = max_num_seqs
        self.import_s = 10.0 / workload.scale

    @contextlib.contextmanager
    def verifier(self, folder: Path, feedback: bool):
        with (
            lean_workers_lease(folder, poll_s=0.05),
            LocalReplBackend(
                [
                    *DOUBLE,
                    "--rules",
                    str(self.root / RULES),
                    "--import-delay",
                    f"{self.import_s:.6f}",
                ],
                pins=make_pins(),
                workers=self.workers,
                check_timeout_s=60.0,
                sandbox=False,
            ) as backend,
        ):
            policy = VerifierPolicy(budget_s=BUDGET_S / self.workload.scale, feedback=feedback)
            yield StrictVerifier(backend, policy, VerdictCache(folder / "verdict_cache"))

    def generate(self, run: Path, stage: Stage, measured: Measured) -> None:
        busy: list[float] = []
        folder = run / stage.name / "generations"
        samples = stage.samples(run)
        engine = TimedEngine(self.workload, self.max_num_seqs, busy, self.engines)

        def generate_now():
            return materialize_generations(
                folder,
                samples,
                opening=EngineOpening(
                    model_path=Path("/models/timed-double"),
                    model_rev="0" * 40,
                    sampling=SAMPLING,
                    max_model_len=CAP + 4096,
                    seed=self.workload.seed,
                    workdir=folder,
                    commit_every=8,
                    cpu_threads=1,
                ),
                open_engine=lambda opening: contextlib.nullcontext(engine),
                load_tokenizer=lambda path: WordTokenizer(),
            )

        started = time.monotonic()
        generate_now()
        measured.gpu_s[stage.name] = time.monotonic() - started
        measured.longest_s[stage.name] = engine.longest_s

    def verify(
        self,
        run: Path,
        stage: Stage,
        measured: Measured,
        sibling: SiblingGeneration | None = None,
    ) -> None:
        started = time.monotonic()
        result = materialize_verdicts(
            run / stage.name / "verdicts",
            generations_file=run / stage.name / "generations" / GENERATIONS_FILE,
            problems_file=run / "problems.jsonl",
            open_verifier=lambda: self.verifier(run, stage.feedback),
            self_test=lambda verifier, header: None,
            commit_every=8,
            sibling=sibling,
        )
        measured.streamed += result.manifest["verified_beside_generation"] or 0
        measured.lean_s[stage.name] = time.monotonic() - started
        counts = result.result
        measured.proofs[stage.name] = counts.total
        measured.verdicts += counts.total
        from prover_assets.records import Verification, iter_records

        rows = list(iter_records(run / stage.name / "verdicts" / VERDICTS_FILE, Verification))
        measured.cached += sum(v.cached_from is not None for v in rows)
        measured.judgements[stage.name] = {(v.key, v.accepted, v.stage) for v in rows}

    def sequential(self, run: Path, stages: Sequence[Stage]) -> Measured:
        measured = Measured()
        started = time.monotonic()
        for stage in stages:
            self.generate(run, stage, measured)
            self.verify(run, stage, measured)
        measured.wall_s = time.monotonic() - started
        return measured

    def overlapped(self, run: Path, stages: Sequence[Stage]) -> Measured:
        measured = Measured()
        generated = {stage.name: threading.Event() for stage in stages}
        verified = {stage.name: threading.Event() for stage in stages}
        errors: list[BaseException] = []

        def lane(step: Callable[[Stage], None]) -> Callable[[], None]:
            def run_lane() -> None:
                try:
                    for stage in stages:
                        step(stage)
                except BaseException as exc:
                    errors.append(exc)
                    for event in [*generated.values(), *verified.values()]:
                        event.set()

            return run_lane

        def gpu_step(stage: Stage) -> None:
            if stage.after is not None:
                verified[stage.after].wait()
            self.generate(run, stage, measured)
            generated[stage.name].set()

        def lean_step(stage: Stage) -> None:
            # The pair's verify op starts with its generation (the same upstream steps) and
            # judges each sample as it lands.
            if stage.after is not None:
                verified[stage.after].wait()
            done = generated[stage.name]
            sibling = SiblingGeneration(
                lambda: GenerationOutcome.COMPLETE if done.is_set() else GenerationOutcome.RUNNING,
                poll_s=0.05,
            )
            self.verify(run, stage, measured, sibling)
            verified[stage.name].set()

        started = time.monotonic()
        threads = [
            threading.Thread(target=lane(gpu_step)),
            threading.Thread(target=lane(lean_step)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        measured.wall_s = time.monotonic() - started
        return measured


def lower_bound(
    measured: Measured,
    layers: Sequence[Sequence[str]],
    workers: int,
    engines: int = 1,
    *,
    floor: bool = False,
) -> float:
    """Per layer: max(GPU / engines, Lean) + the Lean time of one proof; summed. `measured` is
    a run on one engine (its GPU time is what the engines share). With `floor`, a layer also
    takes at least the sum of its steps' longest samples' decode times alone, which no split
    shortens (the steps of a layer share the one `gpu` pool slot, in turn)."""
    total = 0.0
    for layer in layers:
        gpu = sum(measured.gpu_s[name] for name in layer) / engines
        lean = sum(measured.lean_s[name] for name in layer)
        proofs = sum(measured.proofs[name] for name in layer)
        # a layer's generation steps run one after another (one `gpu` pool slot)
        longest = sum(measured.longest_s[name] for name in layer) if floor else 0.0
        total += max(gpu, lean, longest) + lean * workers / max(1, proofs)
    return total


def jobs(n: int) -> dict[str, tuple[list[Stage], list[list[str]]]]:
    """Each job's stages in order, and its dependency layers (stages of a layer are
    independent; a layer waits for the one before)."""

    def round0(name: str) -> Callable[[Path], Samples]:
        return lambda run: round0_samples(run / f"{name}.jsonl", n, CAP)

    def correction(run: Path) -> Samples:
        return correction_samples(
            run / "pool.jsonl",
            run / "pool_r0" / "generations" / GENERATIONS_FILE,
            run / "pool_r0" / "verdicts" / VERDICTS_FILE,
            round=1,
            samples_per_problem=n,
            samples_per_parent=1,
            allow_empty=True,
        )

    baseline = [
        Stage("minif2f", round0("minif2f"), False),
        Stage("mobench", round0("mobench"), False),
    ]
    pool = [
        Stage("pool_r0", round0("pool"), True),
        Stage("pool_r1", correction, True, after="pool_r0"),
    ]
    return {
        "baseline job (miniF2F + MOBench at 16,384)": (baseline, [["minif2f", "mobench"]]),
        "pool round (round 0, verify, corrections, verify)": (pool, [["pool_r0"], ["pool_r1"]]),
    }


def prepare(run: Path, problems: dict[str, int], workload: Workload, n: int) -> None:
    """The problems of every stage, and the REPL double's rules for every sample they can
    have (rounds 0 and 1)."""
    run.mkdir(parents=True)
    everything = []
    for name, count in problems.items():
        rows = [make_problem(f"{name}-{i}") for i in range(count)]
        publish_records(run / f"{name}.jsonl", rows)
        everything += rows
    publish_records(run / "problems.jsonl", everything)
    origins = [(p.problem_id, i, r) for p in everything for i in range(n) for r in (0, 1)]
    (run / RULES).write_text(json.dumps(workload.rules(origins)))


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=100.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--max-num-seqs", type=int, default=64)
    parser.add_argument("--duplicate-rate", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("baseline", "pool"), help="run one job")
    parser.add_argument("--engines", default="1,2,4,8", help="generation engines (one per GPU)")
    parser.add_argument("--minif2f", type=int, default=12, help="problems (registered: 244)")
    parser.add_argument("--mobench", type=int, default=7, help="problems (registered: 135)")
    parser.add_argument("--pool", type=int, default=12, help="problems (registered: 2,000)")
    args = parser.parse_args(argv)
    workload = Workload(args.seed, args.scale, args.duplicate_rate)
    problems = {"minif2f": args.minif2f, "mobench": args.mobench, "pool": args.pool}
    print(
        f"SYNTHETIC round: generation through continuous-batching timing doubles, one per GPU "
        f"({TOKENS_PER_GPU_S:.0f} tok/s each at {args.max_num_seqs} slots), verification through the "
        f"product's verifier to the REPL double ({args.workers} workers), time 1/{args.scale:g}; "
        f"problems {problems}, 8 samples each; duplicate rate {args.duplicate_rate:.0%} (assumed)"
    )
    engines = [int(n) for n in args.engines.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-round-") as tmp:
        for job, (stages, layers) in jobs(8).items():
            if args.only and not job.startswith(args.only):
                continue
            figures = {}
            for shape, n in [("sequential", 1)] + [("overlapped", n) for n in engines]:
                run = Path(tmp) / f"{shape}-{n}" / job.split()[0]
                prepare(run, problems, workload, 8)
                bench = Bench(run, workload, args.workers, args.max_num_seqs, n)
                figures[shape if n == 1 else f"{shape} x{n}"] = getattr(bench, shape)(run, stages)
            report(job, figures, layers, args.workers)
            engines_table(figures, layers, args.workers, engines)
    return 0


def engines_table(
    figures: dict[str, Measured], layers: list[list[str]], workers: int, engines: list[int]
) -> None:
    """Wall time with N engines against max(GPU time / N, Lean time), and against that bound
    with the longest sample's decode as a floor: where Lean, or one sample, takes over."""
    one = figures["sequential"]
    gpu, lean = sum(one.gpu_s.values()), sum(one.lean_s.values())
    longest = sum(one.longest_s.values())
    print(f"  {'engines':>7}  {'wall s':>7}  {'GPU/N s':>7}  {'Lean s':>7}  {'bound s':>7}  "
          f"{'wall/bound':>10}  {'floored s':>9}  {'wall/floored':>12}  bottleneck")  # fmt: skip
    for n in engines:
        measured = figures["overlapped" if n == 1 else f"overlapped x{n}"]
        bound = lower_bound(one, layers, workers, n)
        floored = lower_bound(one, layers, workers, n, floor=True)
        bottleneck = max(
            [("GPU", gpu / n), ("Lean", lean), ("longest sample", longest)], key=lambda x: x[1]
        )[0]
        print(
            f"  {n:>7}  {measured.wall_s:7.1f}  {gpu / n:7.1f}  {lean:7.1f}  {bound:7.1f}  "
            f"{measured.wall_s / bound:10.2f}  {floored:9.1f}  {measured.wall_s / floored:12.2f}  "
            f"{bottleneck}"
        )
    print(
        f"  Lean becomes the bottleneck from N > {gpu / max(lean, 1e-9):.1f} engines "
        f"(GPU time / Lean time); the longest sample alone takes {longest:.1f} s"
    )


def report(job: str, figures: dict[str, Measured], layers: list[list[str]], workers: int) -> None:
    sequential, overlapped = figures["sequential"], figures["overlapped"]
    bound = lower_bound(sequential, layers, workers)
    gpu, lean = sum(sequential.gpu_s.values()), sum(sequential.lean_s.values())
    same = sequential.judgements == overlapped.judgements
    print(f"\n{job}: {sequential.verdicts} samples; GPU {gpu:.1f} s, Lean {lean:.1f} s (scaled)")
    print(
        f"  sequential wall  {sequential.wall_s:6.1f} s  = {sequential.wall_s / bound:.2f} x the lower bound"
    )
    print(
        f"  overlapped wall  {overlapped.wall_s:6.1f} s  = {overlapped.wall_s / bound:.2f} x the lower bound (target <= 1.15)"
    )
    print(f"  lower bound      {bound:6.1f} s  (per layer: max(GPU, Lean) + one proof's Lean time)")
    print(f"  speed-up over sequential: {sequential.wall_s / overlapped.wall_s:.2f} x")
    for shape, measured in figures.items():
        steps = ", ".join(
            f"{name} GPU step {measured.gpu_s[name]:.1f} s, Lean step {measured.lean_s[name]:.1f} s"
            for name in measured.gpu_s
        )
        print(f"  {shape}: {steps}")
    print(
        f"  verified beside generation: {overlapped.streamed} of {overlapped.verdicts}; "
        f"answered by the cache (duplicates): {overlapped.cached} of {overlapped.verdicts} "
        f"({overlapped.cached / max(1, overlapped.verdicts):.1%}); verdicts identical in both shapes: {same}"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
