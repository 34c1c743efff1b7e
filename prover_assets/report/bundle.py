"""The evidence bundle: the report folder, published atomically, never overwritten, verifiable.

`report.md` (plots beside it under `plots/`), `report.html` (the same document, self-contained),
`summary.json`, the plots, and `manifest.json` with the sha256 and size of every
input (problems, generations, verdicts, configs, pre-registration) and every artifact, the
pins, the config, the package version, the git commit and dirty flag.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prover_assets import __version__
from prover_assets.records import (
    MANIFEST_NAME,
    build_manifest,
    publish_folder,
    read_manifest,
    sha256_file,
    write_manifest,
)
from prover_assets.records.manifest import portable_path, recorded_path
from prover_assets.records.outputs import StageResult
from prover_assets.report.markdown import PLOTS_DIR
from prover_assets.report.summary import ReportSummary

__all__ = ["BundleCheck", "ReportResult", "bundle_name", "publish_bundle", "verify_bundle"]

REPORT_FILE = "report.md"
HTML_FILE = "report.html"  # the same document, self-contained (plots embedded)
SUMMARY_FILE = "summary.json"


class ReportResult(StageResult):
    """What a report bundle holds: its comparisons and plots, and whether any verdict in it
    was simulated (then it is no evidence)."""

    comparisons: int
    plots: int
    simulated: bool


def bundle_name(inputs: Sequence[Path], root: Path, identity: Mapping[str, Any]) -> str:
    """A bundle is named by what it reports on and how: its data inputs (as `portable_path`
    names them from `root`, so the name survives a move of the data root holding both, and
    their sha256) and `identity` (the settings and config it was built with)."""
    digest = hashlib.sha256()
    for path in sorted(inputs, key=str):
        digest.update(f"{portable_path(path, root)}\t{sha256_file(path)}\n".encode())
    digest.update(json.dumps(identity, sort_keys=True, default=str).encode())
    return f"report-{digest.hexdigest()[:16]}"


def publish_bundle(
    folder: Path,
    *,
    markdown: str,
    html: str,
    summary: ReportSummary,
    plots: Mapping[str, bytes],
    inputs: Sequence[Path],
    config: Mapping[str, Any],
    started_at: str,
) -> dict[str, Any]:
    """Write the bundle to `folder` atomically; refuses if `folder` exists."""
    with publish_folder(folder) as staging:
        (staging / REPORT_FILE).write_text(markdown, encoding="utf-8")
        (staging / HTML_FILE).write_text(html, encoding="utf-8")
        (staging / SUMMARY_FILE).write_text(summary.model_dump_json(indent=1) + "\n")
        (staging / PLOTS_DIR).mkdir()
        for name, png in plots.items():
            (staging / PLOTS_DIR / name).write_bytes(png)
        artifacts = [
            staging / REPORT_FILE,
            staging / HTML_FILE,
            staging / SUMMARY_FILE,
            *sorted((staging / PLOTS_DIR).iterdir()),
        ]
        manifest = build_manifest(
            folder=staging,
            asset="eval_report",
            inputs=inputs,
            outputs=artifacts,
            config=config,
            counts=ReportResult(
                comparisons=len(summary.comparisons),
                plots=len(plots),
                simulated=summary.simulated,
            ).model_dump(mode="json"),
            started_at=started_at,
            extra={
                "package_version": __version__,
                "pins": summary.pins.model_dump(mode="json") if summary.pins else None,
            },
        )
        write_manifest(staging, manifest)
    return manifest


@dataclass(frozen=True)
class BundleCheck:
    """What re-checking an evidence bundle found: missing or changed files."""

    ok: bool
    changed: list[str]  # what differs from the manifest: missing or modified inputs and artifacts


def verify_bundle(folder: Path) -> BundleCheck:
    """Re-check every hash the bundle's manifest records, and say what changed."""
    if not (folder / MANIFEST_NAME).exists():
        return BundleCheck(False, [f"{folder}/{MANIFEST_NAME} is missing"])
    manifest = read_manifest(folder)
    changed = []
    for role, entries in (("input", manifest["inputs"]), ("artifact", manifest["outputs"])):
        for entry in entries:
            path = recorded_path(folder, entry["path"])
            if role == "artifact" and not path.resolve().is_relative_to(folder.resolve()):
                changed.append(f"artifact {entry['path']} lies outside the bundle {folder}")
            elif not path.exists():
                changed.append(f"{role} {entry['path']} is missing")
            elif sha256_file(path) != entry["sha256"]:
                changed.append(f"{role} {entry['path']} was modified (sha256 differs)")
    listed = {entry["path"] for entry in manifest["outputs"]} | {MANIFEST_NAME}
    extra = [
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and str(p.relative_to(folder)) not in listed
    ]
    changed += [f"artifact {name} is not in the manifest" for name in sorted(extra)]
    return BundleCheck(not changed, changed)
