"""prover-assets: expert-iteration SFT for Lean 4 provers, verified strictly, as Dagster assets."""

import importlib.metadata

try:
    __version__ = importlib.metadata.version("prover-assets")
except importlib.metadata.PackageNotFoundError:  # running from a source tree, not installed
    __version__ = "0.0.0+source"
