"""The Dagster config derived from the domain's models, each kind of field as the Launchpad shows
it; and a resource's config schema with its placeholders required: what the Launchpad
scaffolds and marks, on a hand-built schema whose every kind of place for a placeholder is
known."""

from __future__ import annotations

from typing import Annotated, Literal

import dagster as dg
from dagster._config import process_config, validate_config
from dagster._config.config_type import ConfigTypeKind
from pydantic import BaseModel
from pydantic import Field as PydanticField

from prover_assets.resources.typed_config import dagster_config, placeholders_required

SCHEMA = dg.Shape(
    {
        "name": dg.Field(str, description="the experiment's name"),
        "data_root": dg.Field(str, description="where its outputs go"),
        "pool": dg.Field(
            dg.Shape(
                {
                    "size": dg.Field(int),
                    "shards": dg.Field([dg.Shape({"path": str, "sha256": str})]),
                    "workers": dg.Field(int, default_value=2, is_required=False),
                }
            ),
            description="the train pool",
        ),
        "backend": dg.Field(
            dg.Selector(
                {
                    "local": dg.Field(dg.Shape({"workspace": str, "workers": int})),
                    "remote": dg.Field(dg.Shape({"url": str})),
                }
            )
        ),
        "note": dg.Field(dg.Noneable(str), description="a note"),
        "env": dg.Field(dg.Map(str, str), description="variables"),
    }
)
SHIPPED = {
    "name": "p2",
    "data_root": "REPLACE_ME/data",
    # `workers` left out: its own default stands
    "pool": {"size": 100, "shards": [{"path": "REPLACE_ME/a", "sha256": "REPLACE_ME_SHA"}]},
    "backend": {"local": {"workspace": "REPLACE_ME/lean", "workers": 8}},
    "note": "REPLACE_ME",
    "env": {"HOME": "REPLACE_ME/home"},
}
FILLED = {
    "data_root": "/data",
    "env": {"HOME": "/home/me"},
    "pool": {"shards": [{"path": "/a", "sha256": "f" * 64}]},
    "backend": {"local": {"workspace": "/lean"}},
    "note": "a note",
}


# What the Launchpad scaffolds of a field without a default: each child's default, assembled
# (Dagster's `default_values_from_type_snap`), under the key the resource's config sits at.
SCAFFOLD = {"spec": {"name": "p2", "pool": {"size": 100}, "backend": {"local": {"workers": 8}}}}


def validated(field: dg.Field, config: dict):
    return validate_config(dg.Shape({"spec": field}), config)


def missing(field: dg.Field, config: dict) -> list[str]:
    result = validated(field, config)
    return [] if result.success else sorted(e.message.split(". ")[0] for e in result.errors)


def test_each_placeholder_is_required_and_every_other_value_stays_a_default():
    required = placeholders_required(dg.Field(SCHEMA, default_value=SHIPPED))
    assert missing(required, SCAFFOLD) == [
        "Missing required config entries ['data_root', 'env', 'note'] at path root:spec",
        'Missing required config entry "shards" at path root:spec:pool',
        'Missing required config entry "workspace" at path root:spec:backend:local',
    ]
    # the values left as defaults come back as they were shipped
    filled = process_config(dg.Shape({"spec": required}), {"spec": FILLED}).value["spec"]
    kept = (filled["name"], filled["pool"]["size"], filled["pool"]["workers"])
    assert (*kept, filled["backend"]["local"]["workers"]) == ("p2", 100, 2, 8)


def test_each_value_keeps_its_type_and_its_description():
    required = placeholders_required(dg.Field(SCHEMA, default_value=SHIPPED, description="spec"))
    for wrong in ({"name": 5}, {"data_root": 5}, {"note": 5}, {"env": {"HOME": 5}}):
        assert not validated(required, {"spec": {**FILLED, **wrong}}).success, wrong
    assert validated(required, {"spec": {**FILLED, "note": None}}).success  # still Noneable
    fields = required.config_type.fields
    assert required.description == "spec"
    assert {name: fields[name].description for name in ("name", "data_root", "pool", "note")} == {
        "name": "the experiment's name",  # a default kept
        "data_root": "where its outputs go",  # a placeholder
        "pool": "the train pool",  # a shape holding one
        "note": "a note",  # a placeholder that may be None
    }
    assert fields["env"].description == "variables"  # a map holding one: required whole


def test_a_selector_holding_a_placeholder_offers_its_chosen_member_alone():
    required = placeholders_required(dg.Field(SCHEMA, default_value=SHIPPED))
    other = {**FILLED, "backend": {"remote": {"url": "http://lean:8000"}}}
    errors = [e.message for e in validated(required, {"spec": other}).errors]
    assert any('unexpected config entry "remote"' in e for e in errors), errors


def test_a_field_without_placeholders_is_kept_as_it_was():
    shipped = {**SHIPPED, **FILLED, "pool": {"size": 1, **FILLED["pool"]}}
    shipped["backend"] = {"local": {"workspace": "/lean", "workers": 2}}
    field = dg.Field(SCHEMA, default_value=shipped)
    assert placeholders_required(field) is field
    assert missing(field, {}) == []  # its default, whole


class Inner(BaseModel):
    x: int = 1


class Local(BaseModel):
    kind: Literal["local"] = "local"
    workers: int = 8


class Remote(BaseModel):
    kind: Literal["remote"] = "remote"
    url: str


class Outer(BaseModel):
    """A model with every kind of field the domain's configs hold."""

    size: Annotated[int, PydanticField(ge=1)] = 3
    inner: Inner = Inner()
    maybe: Inner | None = None
    items: list[Inner] = []
    table: dict[str, Inner] = {}
    gpus: list[int] | Literal["all"] = "all"
    limit: int | None = None
    ports: list[Annotated[int, PydanticField(ge=1)]] = []
    backend: Annotated[Local | Remote, PydanticField(discriminator="kind")]


def shown(config_type) -> object:
    """A config type's kind, with the kinds it wraps (a list's items, a map's values)."""
    if config_type.kind in (ConfigTypeKind.NONEABLE, ConfigTypeKind.ARRAY, ConfigTypeKind.MAP):
        return (config_type.kind.value, shown(config_type.inner_type))
    return config_type.kind.value


def test_each_kind_of_model_field_becomes_the_dagster_config_type_the_launchpad_shows():
    # built afresh (`dagster_config` caches: the resources' classes are built at import)
    fields = dagster_config.__wrapped__(Outer).to_config_schema().as_field().config_type.fields
    # a defaulted value is Noneable (a null the Launchpad drops is the default); a nested
    # model keeps its own defaults
    assert {name: shown(field.config_type) for name, field in fields.items()} == {
        # the constraint left to the domain model; Dagster's IntSource: a number or {env: VAR}
        "size": ("NONEABLE", "SCALAR_UNION"),
        "inner": "STRICT_SHAPE",
        "maybe": ("NONEABLE", "STRICT_SHAPE"),
        "items": ("NONEABLE", ("ARRAY", "STRICT_SHAPE")),
        "table": ("NONEABLE", ("MAP", "STRICT_SHAPE")),
        "gpus": ("NONEABLE", "ANY"),  # a list or a word: Dagster has no union of values
        "limit": ("NONEABLE", "SCALAR_UNION"),  # one kind of value, or none
        "ports": ("NONEABLE", ("ARRAY", "SCALAR_UNION")),  # the items' constraint left out
        "backend": "SELECTOR",
    }
    assert set(fields["backend"].config_type.fields) == {"local", "remote"}
    assert (fields["size"].default_value, fields["inner"].default_value) == (3, {"x": 1})
    assert fields["backend"].is_required  # no default: the user chooses
