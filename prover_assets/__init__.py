"""prover-assets: expert-iteration SFT for Lean 4 provers, verified strictly, as Dagster assets."""


def __getattr__(name: str) -> str:
    # Read on first use: `importlib.metadata` costs about 45 ms, paid by every process that
    # imports the package (each Lean REPL double and worker the verifier starts) otherwise.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib.metadata

    try:
        return importlib.metadata.version("prover-assets")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree, not installed
        return "0.0.0+source"
