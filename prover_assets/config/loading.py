"""One YAML file read into a `RunConfig`: duplicate keys refused, every error at its key path
in the file, placeholders listed, the three sections validated together."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError, model_validator

from prover_assets.config.base import ConfigError, StrictSpec, is_placeholder
from prover_assets.config.experiment import ExperimentSpec
from prover_assets.config.settings import (
    EngineSettings,
    LeanSettings,
    lean_from_selector,
    require_backend_allowed,
)


class RunConfig(StrictSpec):
    """The three resources' settings of one run config, validated together."""

    experiment: ExperimentSpec
    lean: LeanSettings
    gpu: EngineSettings
    source: str  # the file it was read from
    placeholders: tuple[str, ...] = ()  # key paths of the `REPLACE_ME` values still in it

    @model_validator(mode="after")
    def _simulated_only_in_demo(self) -> RunConfig:
        require_backend_allowed(self.experiment.kind, self.lean.backend)
        return self


_LEAN_ADAPTER: TypeAdapter[LeanSettings] = TypeAdapter(LeanSettings)


class _UniqueKeyLoader(yaml.SafeLoader):
    pass


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise ConfigError(
                f"line {key_node.start_mark.line + 1}: duplicate key {key!r} in the same mapping"
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)


_SECTION_PATHS = {
    "experiment": "resources.experiment.config.spec",
    "lean": "resources.lean.config.settings",
    "gpu": "resources.gpu.config.settings",
}


def _format_errors(exc: ValidationError, section: str | None = None) -> str:
    """One line per error, at its key path in the run config; `section`: the resource the
    errors' locations are relative to (else their first element names it)."""
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        head, rest = (section, loc) if section else (loc[0] if loc else "", loc[1:])
        where = ".".join([_SECTION_PATHS.get(head, head), *rest])
        lines.append(f"  {where}: {error['msg']} (got {error.get('input')!r:.80})")
    return "\n".join(lines)


def _section(raw: dict[str, Any], name: str, field: str, source: str) -> Any:
    try:
        section = raw["resources"][name]["config"][field]
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{source}: missing resources.{name}.config.{field}") from exc
    return section


def _parse(validate: Callable[[Any], Any], data: Any, section: str, source: str) -> Any:
    """`validate(data)`, its errors raised as one `ConfigError` naming each invalid key."""
    try:
        return validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"{source}: invalid configuration:\n{_format_errors(exc, section)}"
        ) from exc


def parse_experiment_spec(data: Any, source: str = "run config") -> ExperimentSpec:
    """The experiment section as an ExperimentSpec; raises `ConfigError` naming each invalid key."""
    return _parse(ExperimentSpec.model_validate, data, "experiment", source)


def parse_lean_settings(data: Any, source: str = "run config") -> LeanSettings:
    """The Lean settings from the run config's `{backend: {...}}` selector (or a flat mapping
    with `backend`)."""
    return _parse(
        lambda raw: _LEAN_ADAPTER.validate_python(lean_from_selector(raw)), data, "lean", source
    )


def parse_engine_settings(data: Any, source: str = "run config") -> EngineSettings:
    """The gpu section as EngineSettings; raises `ConfigError` naming each invalid key."""
    return _parse(EngineSettings.model_validate, data, "gpu", source)


def same_shape(run: ExperimentSpec, built: ExperimentSpec) -> None:
    """The asset graph was built from one config; a run must not bring another shape."""
    shape = lambda spec: (  # noqa: E731
        spec.kind,
        {name: spec.caps_of(name) for name in spec.eval_sets},
        spec.generation.caps,
        spec.sft.cap,
        spec.corrections.rounds,
        spec.iterations,
        spec.training.all_seeds(),
    )
    if shape(run) != shape(built):
        raise ConfigError(
            f"this run's config has the shape {shape(run)}, but the asset graph was built from "
            f"{shape(built)}: point PROVER_ASSETS_CONFIG at the config you launch with"
        )


def placeholders(raw: Any, path: str = "") -> list[str]:
    """The key path of every `REPLACE_ME...` value in a run config, in file order."""
    if isinstance(raw, str):
        return [path] if is_placeholder(raw) else []
    if isinstance(raw, dict):
        items = [(f"{path}.{key}" if path else str(key), value) for key, value in raw.items()]
    elif isinstance(raw, list):
        items = [(f"{path}[{index}]", value) for index, value in enumerate(raw)]
    else:
        return []
    return [found for where, value in items for found in placeholders(value, where)]


def require_no_placeholders(raw: Any, source: str) -> None:
    """Raise naming every placeholder still in the run config, with its key path."""
    if found := placeholders(raw):
        lines = "\n".join(f"  {where}" for where in found)
        raise ConfigError(
            f"{source}: {len(found)} placeholder values are still to be filled in (paths on "
            f"your machine, the pool shards' sha256):\n{lines}"
        )


def parse_run_config(raw: Any, source: str) -> RunConfig:
    """A run config (the file's or a launch's mapping) as a RunConfig; raises `ConfigError`
    naming the source and the key path of every invalid value."""
    if not isinstance(raw, dict) or set(raw) - {"resources", "execution", "loggers"}:
        raise ConfigError(
            f"{source}: a run config has top-level keys resources (and optionally execution, "
            f"loggers); found {sorted(raw) if isinstance(raw, dict) else type(raw).__name__}"
        )
    unknown_resources = set(raw.get("resources") or {}) - {"experiment", "lean", "gpu"}
    if unknown_resources:
        raise ConfigError(f"{source}: unknown resources {sorted(unknown_resources)}")
    sections = {
        "experiment": _section(raw, "experiment", "spec", source),
        "lean": lean_from_selector(_section(raw, "lean", "settings", source)),
        "gpu": _section(raw, "gpu", "settings", source),
    }
    try:
        return RunConfig.model_validate(
            {**sections, "source": source, "placeholders": tuple(placeholders(raw))}
        )
    except ValidationError as exc:
        raise ConfigError(f"{source}: invalid configuration:\n{_format_errors(exc)}") from exc


def assemble_run_config(
    experiment: ExperimentSpec, lean: LeanSettings, gpu: EngineSettings, source: str
) -> RunConfig:
    """The RunConfig of three validated sections (a run's resources), its placeholders found
    again under their key paths."""
    raw = {
        "resources": {
            "experiment": {"config": {"spec": experiment.model_dump(mode="json")}},
            "lean": {"config": {"settings": lean.model_dump(mode="json")}},
            "gpu": {"config": {"settings": gpu.model_dump(mode="json")}},
        }
    }
    return parse_run_config(raw, source)


def load_run_config(path: str | Path) -> RunConfig:
    """Read and validate a run config file; raises `ConfigError` naming the file and key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    return parse_run_config(raw, str(path))
