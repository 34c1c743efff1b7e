"""The demo: the tiny Qwen3-architecture model the CPU loop samples and trains
(`tiny_model`), its format tunings shared between loops (`shared_tunings`), and the CLI that
launches the demo's jobs in order (`python -m prover_assets.demo`, `__main__.py`, which alone
here imports Dagster: it launches jobs). The demo's verification rule is the simulated
verifier's (`verify/simulator.py`, a backend beside the real ones)."""
