"""What every config section shares: strictness, the `REPLACE_ME` placeholders, paths shipped
inside the package, and the error that names where a value is wrong."""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PLACEHOLDER_PREFIX = "REPLACE_ME"
PACKAGE_PREFIX = "package:"


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message says where and what to do."""


class StrictSpec(BaseModel):
    """A config section: unknown keys, wrong types and changes after loading are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Sha256OrPlaceholder = Annotated[str, Field(pattern=rf"^([0-9a-f]{{64}}|{PLACEHOLDER_PREFIX}.*)$")]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Probability = Annotated[float, Field(gt=0, le=1)]


def is_placeholder(value: str) -> bool:
    """Whether a config value is still a `REPLACE_ME...` placeholder."""
    return value.startswith(PLACEHOLDER_PREFIX)


def require_filled(value: str, where: str) -> str:
    """Return `value`, or raise telling the user which placeholder to fill in."""
    if is_placeholder(value):
        raise ConfigError(
            f"{where} is still the placeholder {value!r}: fill it in in your config file"
        )
    return value


def resolve_path(value: str, where: str) -> Path:
    """`package:<rel>` is data shipped inside prover_assets/data; other paths are used as given
    (relative ones against the working directory, the project root)."""
    require_filled(value, where)
    if value.startswith(PACKAGE_PREFIX):
        root = importlib.resources.files("prover_assets") / "data"
        return Path(str(root)) / value[len(PACKAGE_PREFIX) :]
    return Path(value).expanduser()


class InputFile(StrictSpec):
    """A file the experiment reads, with the sha256 it must have."""

    path: str
    sha256: Sha256OrPlaceholder  # checked before the file is read
