"""Turning step results into Dagster metadata: counts, histograms, hashes, plots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from prover_assets.report.markdown import histogram_table, markdown_table

__all__ = ["files_table", "histogram", "manifest_metadata", "output_dir"]

OUTPUT_DIR = "output_dir"


def files_table(manifest: Mapping[str, Any]) -> dg.MetadataValue:
    """A Markdown table of a manifest's input and output files (path, short sha256, bytes)."""
    rows = [("input", e["path"], e["sha256"][:16], e["bytes"]) for e in manifest["inputs"]]
    rows += [("output", e["path"], e["sha256"][:16], e["bytes"]) for e in manifest["outputs"]]
    return dg.MetadataValue.md(markdown_table(["role", "path", "sha256 (16)", "bytes"], rows))


def histogram(counts: Mapping[str, int], key: str = "reason") -> dg.MetadataValue:
    """A Markdown table of counts, largest first."""
    return dg.MetadataValue.md(histogram_table(counts, key=key))


def manifest_metadata(folder: Any, manifest: Mapping[str, Any], reused: bool) -> dict[str, Any]:
    """What every file-producing asset reports: where, which files (sha256), which code."""
    code = manifest["code"]
    return {
        OUTPUT_DIR: dg.MetadataValue.path(str(folder)),
        "files": files_table(manifest),
        "code_commit": code["commit"] or f"unknown: {code['reason']}",
        "code_dirty": code["dirty"] if code["dirty"] is not None else "unknown",
        "reused_complete_output": reused,
    }


def output_dir(context: dg.AssetCheckExecutionContext, key: dg.AssetKey) -> str:
    """The folder of the latest materialization of `key`, as that materialization recorded it.

    Checks read what was materialized, never a path of their own making.
    """
    event = context.instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        raise dg.Failure(f"{key.to_user_string()} has not been materialized")
    value = event.asset_materialization.metadata.get(OUTPUT_DIR)
    if value is None:
        raise dg.Failure(f"the materialization of {key.to_user_string()} records no {OUTPUT_DIR}")
    return value.value
