"""A resource's config schema with its placeholders required: what the Launchpad scaffolds and
marks, on a hand-built schema whose every kind of place for a placeholder is known."""

from __future__ import annotations

import dagster as dg
from dagster._config import process_config, validate_config

from prover_assets.resources.typed_config import placeholders_required

SCHEMA = dg.Shape(
    {
        "name": dg.Field(str),
        "data_root": dg.Field(str),
        "pool": dg.Field(
            dg.Shape(
                {
                    "size": dg.Field(int),
                    "shards": dg.Field([dg.Shape({"path": str, "sha256": str})]),
                }
            )
        ),
        "backend": dg.Field(
            dg.Selector(
                {
                    "local": dg.Field(dg.Shape({"workspace": str, "workers": int})),
                    "remote": dg.Field(dg.Shape({"url": str})),
                }
            )
        ),
        "note": dg.Field(dg.Noneable(str)),
    }
)
SHIPPED = {
    "name": "p2",
    "data_root": "REPLACE_ME/data",
    "pool": {"size": 100, "shards": [{"path": "REPLACE_ME/a", "sha256": "REPLACE_ME_SHA"}]},
    "backend": {"local": {"workspace": "REPLACE_ME/lean", "workers": 8}},
    "note": "REPLACE_ME",
}
FILLED = {
    "data_root": "/data",
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
        "Missing required config entries ['data_root', 'note'] at path root:spec",
        'Missing required config entry "shards" at path root:spec:pool',
        'Missing required config entry "workspace" at path root:spec:backend:local',
    ]
    # the values left as defaults come back as they were shipped
    filled = process_config(dg.Shape({"spec": required}), {"spec": FILLED}).value["spec"]
    assert (filled["name"], filled["pool"]["size"], filled["backend"]["local"]["workers"]) == (
        "p2",
        100,
        8,
    )


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
