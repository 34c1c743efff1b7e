"""The progress reporter: the first call, then at most every interval, and the last; its ETA and
its observations' rounding."""

import dagster as dg


class RecordingLog:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, line: str) -> None:
        self.lines.append(line)


class RecordingContext:
    """What a reporter uses of a step's context: its log, its events, and its output's asset
    (an op of a two-asset pair answers only `asset_key_for_output`, not `asset_key`)."""

    def __init__(self) -> None:
        self.log = RecordingLog()
        self.events: list[dg.AssetObservation] = []

    def asset_key_for_output(self) -> dg.AssetKey:
        return dg.AssetKey("generations")

    def log_event(self, event: dg.AssetObservation) -> None:
        self.events.append(event)


def test_the_eta_mid_run_is_the_remaining_samples_over_the_samples_rate(monkeypatch):
    from prover_assets.assets.progress import ProgressReporter
    from prover_assets.generation import runner

    stats = runner.GenerationStats(total=100, already_present=10, started=1000.0)
    stats.generated_now = 30  # 30 samples in 60 s: 0.5 samples/s; 60 left: 120 s
    stats.completion_tokens = [900] * 30  # 450 tokens/s, which must not enter the ETA
    monkeypatch.setattr(runner.time, "monotonic", lambda: 1060.0)
    context = RecordingContext()
    ProgressReporter(context, "samples")(stats.done, stats.total, stats.samples_per_s(), "samples")
    assert context.log.lines == ["samples: 40/100 (0.50 samples/s, ETA 0:02:00)"]
    assert context.events[0].metadata["eta"].value == "0:02:00"


def test_the_reporter_logs_the_first_call_then_at_most_every_interval_and_always_the_last(
    monkeypatch,
):
    from prover_assets.assets import progress

    clock = iter([0.0, 3.0, 9.9, 10.0, 12.0, 12.5])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    context = RecordingContext()
    reporter = progress.ProgressReporter(context, "steps", log_every_s=10.0, observe_every_s=60.0)
    for done in (1, 2, 3, 4, 5, 6):
        reporter(done, 6, None, "steps")
    # t = 0 (first), 10.0 (10 s after the first), 12.5 (done == total)
    assert context.log.lines == ["steps: 1/6", "steps: 4/6", "steps: 6/6"]
    # observations: the first, and with the last
    assert [e.metadata["done"].value for e in context.events] == [1, 6]


def test_a_final_call_is_logged_even_before_the_total_is_reached(monkeypatch):
    from prover_assets.assets import progress

    monkeypatch.setattr(progress.time, "monotonic", lambda: 5.0)
    context = RecordingContext()
    reporter = progress.ProgressReporter(context, "phases", log_every_s=60.0)
    reporter(0, 4, None, "phases")
    reporter(1, 4, None, "phases")
    reporter(2, 4, None, "phases", final=True)
    assert context.log.lines == ["phases: 0/4", "phases: 2/4"]


def test_calls_past_the_total_are_not_logged_again(monkeypatch):
    from prover_assets.assets import progress

    monkeypatch.setattr(progress.time, "monotonic", lambda: 5.0)
    context = RecordingContext()
    reporter = progress.ProgressReporter(context, "samples", log_every_s=60.0)
    for done in (1, 2, 2, 2):
        reporter(done, 2, None, "samples")
    assert context.log.lines == ["samples: 1/2", "samples: 2/2"]


def test_the_observations_floats_are_rounded_as_every_metadata_value_is():
    from prover_assets.assets.progress import ProgressReporter

    context = RecordingContext()
    reporter = ProgressReporter(context, "samples")
    reporter(3, 10, 1.1829756491327286, "samples", {"tokens_per_s": 6779.4321, "note": "x"})
    metadata = context.events[0].metadata
    # three significant figures below 100, one decimal from 100 up (assets/metadata.py)
    assert metadata["samples_per_s"].value == 1.18
    assert metadata["tokens_per_s"].value == 6779.4
    assert metadata["note"].value == "x"
