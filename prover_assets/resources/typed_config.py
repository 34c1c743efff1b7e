"""Dagster config classes derived from the domain's config models, so that one model owns each
setting and the Launchpad still shows its schema.

`dagster_config(ExperimentSpec)` is a `dg.Config` class with the same fields: nested models
become nested config classes, optional fields keep their defaults (a null the Launchpad drops is
the default), a discriminated union becomes a selector (`{local: {...}}`). Value constraints
(ranges, patterns, cross-field rules) stay with the domain model, which validates the values
once per run; Dagster checks keys, types and required fields before launch.

`placeholders_required(field)` takes a resource's config field, its values the defaults, and
leaves each value still a `REPLACE_ME` placeholder without a default and required: Dagster's own
validation, the Launchpad's as the config is typed, then marks each one as a missing entry at
its path before any launch (a placeholder is a string, which no Dagster type refuses).
"""

from __future__ import annotations

import functools
import types
from typing import Annotated, Any, Union, get_args, get_origin

import dagster as dg
from dagster._config.config_type import ConfigType, ConfigTypeKind
from pydantic import BaseModel, Field, create_model

from prover_assets.config import placeholders

__all__ = ["dagster_config", "placeholders_required"]


def _without_constraints(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _config_annotation(annotation: Any) -> Any:
    annotation = _without_constraints(annotation)
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return dagster_config(annotation)
    if origin in (Union, types.UnionType):
        members = get_args(annotation)
        if _holds_two_kinds_of_value(members):
            # Dagster's config has no union of values (a list or a word, `training.gpus`):
            # the Launchpad takes any value there and the domain model judges it.
            return Any
        return Union[tuple(_config_annotation(member) for member in members)]  # noqa: UP007
    if origin is list:
        return list[_config_annotation(get_args(annotation)[0])]
    if origin is dict:
        key, value = get_args(annotation)
        return dict[key, _config_annotation(value)]
    return annotation


def _holds_two_kinds_of_value(members: tuple[Any, ...]) -> bool:
    """A union of two or more non-null members that are not all config models (an Optional
    or a discriminated union of models Dagster can show)."""
    values = [m for m in members if m is not type(None)]
    models = [m for m in values if isinstance(m, type) and issubclass(m, BaseModel)]
    return len(values) > 1 and len(models) < len(values)


def _config_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return dagster_config(type(value))(**value.model_dump())
    return value


@functools.cache
def dagster_config(model: type[BaseModel]) -> type[dg.Config]:
    """The `dg.Config` class with `model`'s fields (see the module docstring)."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if info.discriminator:
            default: Any = Field(discriminator=info.discriminator, description=info.description)
        elif info.is_required():
            default = Field(description=info.description)
        else:
            default = Field(
                _config_default(info.get_default(call_default_factory=True)),
                description=info.description,
            )
        fields[name] = (_config_annotation(info.annotation), default)
    return create_model(
        f"{model.__name__}Config", __base__=dg.Config, __doc__=model.__doc__, **fields
    )


def placeholders_required(field: dg.Field) -> dg.Field:
    """`field` (a resource's config, its values the defaults) with every value that is still a
    placeholder, or holds one (a list of pool shards), required and without a default; every
    other value stays the default, so the Launchpad scaffolds all but those. A selector whose
    chosen member holds a placeholder offers that member alone until it is filled in: Dagster
    scaffolds a selector without a default with every member at once, which is no config."""
    if not field.default_provided or not placeholders(field.default_value):
        return field
    return _required_where_placeholder(field.config_type, field.default_value, field.description)


def _required_where_placeholder(
    config_type: ConfigType, default: Any, description: str | None
) -> dg.Field:
    if not placeholders(default):
        return dg.Field(
            config_type, default_value=default, is_required=False, description=description
        )
    kind = config_type.kind
    if kind is ConfigTypeKind.NONEABLE:
        inner = _required_where_placeholder(config_type.inner_type, default, description)
        return dg.Field(dg.Noneable(inner.config_type), is_required=True, description=description)
    if kind in _SHAPES and isinstance(default, dict):
        fields = {
            name: (
                _required_where_placeholder(child.config_type, default[name], child.description)
                if name in default
                else child
            )
            for name, child in config_type.fields.items()
            if name in default or kind is not ConfigTypeKind.SELECTOR
        }
        return dg.Field(_SHAPES[kind](config_type, fields), description=description)
    return dg.Field(config_type, is_required=True, description=description)


# Each kind of config type with fields, rebuilt with new fields as it was built.
_SHAPES = {
    ConfigTypeKind.STRICT_SHAPE: lambda old, fields: dg.Shape(
        fields, description=old.description, field_aliases=old.field_aliases
    ),
    ConfigTypeKind.PERMISSIVE_SHAPE: lambda old, fields: dg.Permissive(
        fields, description=old.description
    ),
    ConfigTypeKind.SELECTOR: lambda old, fields: dg.Selector(fields, description=old.description),
}
