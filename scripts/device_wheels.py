"""The wheels the device check carries to the device machine, found by running it, not by a list.

    python scripts/device_wheels.py     # runs the device check's reduced mode here, then
                                        # downloads what it imported into .whl/ (ignored by git)

The device machine's image ('cuda': Python 3.12) holds torch and a set of packages at versions
this checkout was not tested with: transformers 5.17 and huggingface-hub 1.33 where this checkout
runs transformers 5.25, which refuses at import any huggingface-hub below 2.4. So every
distribution the check imports is carried at this checkout's version, except the image's torch
stack and the packages only probed for (`FROM_IMAGE`, with why). Carried wheels shadow the
image's: the call carries `.whl` and starts its command with

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site && scripts/device_check.sh

Before downloading, every requirement of a carried distribution on one left to the image is
checked against the image's version where it is known (`unmet`); an unmet one stops the script.
flash-attn and vLLM are not carried (hundreds of MB against the 64 MiB a call may carry): the
check then trains with SDPA and generates with the transformers engine, and its report says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent.parent
WHEELS = HERE / ".whl"
# The image's Python, the markers a requirement is read under there.
DEVICE_PYTHON = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "extra": "",
}
# Distributions the check imports that it takes from the image (each in the image's package
# list of the device library's KINDS.md, 2026-11-17), with the image's version where a session's
# pip list there read it (None: not read).
FROM_IMAGE: dict[str, str | None] = {
    # torch's CUDA build (a carried one is about 900 MB) and what torch itself imports
    "torch": "2.11.0",
    "sympy": None,
    "mpmath": None,
    "jinja2": None,
    "markupsafe": None,
    "setuptools": None,
    "numpy": "2.5.2",  # 16 MB; transformers asks numpy>=1.17
    # imported only by transformers' and accelerate's is-it-installed probes: the image's, if any
    "scipy": None,
    "pillow": None,
    "protobuf": None,
    "charset-normalizer": None,
    # not in the image, and not needed: every load asks for no Hub kernels (model_loading.py)
    "kernels": None,
}
NOT_A_WHEEL = {"prover-assets"}  # the working tree itself travels


def imported_distributions(out: Path) -> dict[str, str]:
    """The distributions (canonical name -> version) the reduced device check imports."""
    subprocess.run(
        [sys.executable, str(HERE / "scripts" / "device_check.py"), "--out", str(out), "--reduced"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return json.loads((out / "report.json").read_text())["distributions"]


def carried(imported: dict[str, str]) -> dict[str, str]:
    """What travels as wheels: every imported distribution the image does not serve."""
    return {
        name: version
        for name, version in imported.items()
        if name not in FROM_IMAGE and name not in NOT_A_WHEEL
    }


def requirements_of(name: str) -> list[Requirement]:
    """`name`'s installed requirements that hold on the device's Python (no extras)."""
    wanted = []
    for text in metadata.requires(name) or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(DEVICE_PYTHON):
            wanted.append(requirement)
    return wanted


def unmet(
    wheels: dict[str, str],
    image: dict[str, str | None],
    requirements: dict[str, list[Requirement]],
) -> list[str]:
    """Each requirement of a carried distribution that the versions on the device break: a
    carried version outside it, or an image version known to be outside it."""
    broken = []
    for name in sorted(wheels):
        for requirement in requirements[name]:
            needed = canonicalize_name(requirement.name)
            there = wheels.get(needed) or image.get(needed)
            if there is not None and not requirement.specifier.contains(there, prereleases=True):
                source = "carried" if needed in wheels else "the image's"
                broken.append(f"{name} {wheels[name]} needs {requirement}; {source} is {there}")
    return broken


def download(wheels: dict[str, str]) -> None:
    """Into an emptied `.whl/`: two versions of one name there would stop the install."""
    WHEELS.mkdir(exist_ok=True)
    for stale in WHEELS.glob("*.whl"):
        stale.unlink()
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        + ["--python-version", "3.12", "--implementation", "cp", "-d", str(WHEELS)]
        + [arg for platform in platforms for arg in ("--platform", platform)]
        + [f"{name}=={version}" for name, version in sorted(wheels.items())],
        check=True,
    )


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        imported = imported_distributions(Path(scratch))
    wheels = carried(imported)
    broken = unmet(wheels, FROM_IMAGE, {name: requirements_of(name) for name in wheels})
    if broken:
        print("the device would break these requirements:\n  " + "\n  ".join(broken))
        return 1
    download(wheels)
    kept = sorted(set(imported) & set(FROM_IMAGE))
    files = sorted(WHEELS.glob("*.whl"))
    size = sum(path.stat().st_size for path in files)
    print(f"carried ({len(wheels)}): " + ", ".join(f"{n}=={v}" for n, v in sorted(wheels.items())))
    print(f"from the image ({len(kept)}): " + ", ".join(kept))
    print(f"{len(files)} wheels in {WHEELS}, {size / 2**20:.1f} MiB (a call carries 64 MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
