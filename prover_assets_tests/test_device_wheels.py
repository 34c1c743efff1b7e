"""What the device check carries: every distribution it imports that the device image would
serve at a version that breaks it (scripts/device_wheels.py)."""

import importlib.util
from pathlib import Path

from packaging.requirements import Requirement

SCRIPT = Path(__file__).parents[1] / "scripts" / "device_wheels.py"
_spec = importlib.util.spec_from_file_location("device_wheels", SCRIPT)
device_wheels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(device_wheels)


def needs(**requirements: list[str]) -> dict[str, list[Requirement]]:
    return {name: [Requirement(text) for text in texts] for name, texts in requirements.items()}


def test_a_carried_version_outside_a_requirement_is_unmet():
    broken = device_wheels.unmet({"a": "1.0", "b": "1.0"}, {}, needs(a=["b>=2"], b=[]))
    assert broken == ["a 1.0 needs b>=2; carried is 1.0"]


def test_an_image_version_known_to_be_outside_a_requirement_is_unmet():
    broken = device_wheels.unmet({"a": "1.0"}, {"b": "1.33.0"}, needs(a=["b<3,>=2.4.0"]))
    assert broken == ["a 1.0 needs b<3,>=2.4.0; the image's is 1.33.0"]


def test_an_image_version_inside_or_unread_meets_the_requirement():
    image = {"b": "2.5.2", "c": None}
    assert device_wheels.unmet({"a": "1.0"}, image, needs(a=["b>=1.17", "c>=9"])) == []


def test_a_requirement_on_a_distribution_nowhere_on_the_device_is_not_judged():
    # nothing the check imports: pip's --no-deps never installs it and nothing asks for it
    assert device_wheels.unmet({"a": "1.0"}, {}, needs(a=["typer>=99"])) == []


def test_a_carried_version_shadows_the_image_one():
    broken = device_wheels.unmet({"a": "1.0", "b": "2.1rc1"}, {"b": "1.0"}, needs(a=["b>=2"], b=[]))
    assert broken == []


def test_the_carried_set_leaves_out_the_image_torch_stack_and_the_tree_itself():
    imported = {"torch": "2.13.0", "numpy": "2.5.2", "prover-assets": "0", "peft": "0.21.2"}
    assert device_wheels.carried(imported) == {"peft": "0.21.2"}


def test_the_hand_list_carried_before_breaks_transformers_on_the_image():
    # the wheels scripts/device_wheels.sh carried: transformers 5.25 came without the hub it
    # asks for at import (its dependency_versions_check), and the image's hub is 1.33.0
    before = {"transformers": "5.25.0", "peft": "0.21.2", "pydantic": "2.14.4"}
    image = {"huggingface-hub": "1.33.0"}
    transformers_needs = needs(
        transformers=["huggingface-hub<3.0,>=2.4.0", "tokenizers<0.24.0,>=0.23.1"],
        peft=["huggingface_hub>=0.25.0"],
        pydantic=[],
    )
    assert device_wheels.unmet(before, image, transformers_needs) == [
        "transformers 5.25.0 needs huggingface-hub<3.0,>=2.4.0; the image's is 1.33.0"
    ]


def test_requirements_are_read_under_the_device_python_without_extras():
    names = {r.name for r in device_wheels.requirements_of("huggingface_hub")}
    assert "httpx2" in names  # unconditional
    assert "tomli" not in names  # python_version < "3.11" only
    assert not any("extra" in str(r.marker) for r in device_wheels.requirements_of("transformers"))
