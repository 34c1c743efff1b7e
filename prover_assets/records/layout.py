"""Which folder under the data root holds each asset's output, and which asset a folder is.

A folder's path is its asset key's path, but for generations, verdicts and statement audits.
Dagster's UI labels a node, and every link to a node of another group, with the key's last part
alone (cut in the middle past 30 characters): `c256` named baseline and candidate alike, `r0` a
round's generations and its verdicts, `minif2f` an eval set's problems and its statement audit.
So their keys end in a label that reads as a phrase: what, whose, on what, at which cap or
round, of which training seed (`verdicts/minif2f/baseline/verdicts_baseline_minif2f_c256`,
`generations/pool/generations_pool_r0`, `statement_audit/statement_audit_minif2f`), the kind
first so that a cut label still says it. Their folders keep the layout the data root has always
had (`verdicts/minif2f/baseline/c256`, `generations/pool/r0`, `statement_audit/minif2f`):
nothing written before the keys were labelled moves, and a folder's path is the key its outputs
were first materialized under (`legacy_key_path`).
"""

from __future__ import annotations

import re

__all__ = ["LABELLED_KINDS", "folder_path", "key_path", "legacy_key_path"]

LABELLED_KINDS = ("generations", "verdicts", "statement_audit", "reference_elaboration")


def _labelled(path: tuple[str, ...]) -> bool:
    return len(path) >= 2 and path[0] in LABELLED_KINDS


_SEEDED = re.compile(r"(?P<system>.+)_(?P<seed>seed\d+)")


def _around_last(kind: str, owners: tuple[str, ...]) -> tuple[str, str]:
    """What a label puts before and after the folder's last part (a cap or a round), given
    the folders between `kind` and it: an eval set's (set, system) read kind, system, set, cap,
    then a training seed's (`generations_candidate_minif2f_c256_seed7`), so that the UI's cut in
    the middle spares the kind, the cap and the seed; the pool's, kind, pool, round."""
    if len(owners) == 2:
        eval_set, system = owners
        seeded = _SEEDED.fullmatch(system)
        base, seed = (seeded["system"], "_" + seeded["seed"]) if seeded else (system, "")
        return f"{kind}_{base}_{eval_set}_", seed
    return "".join(f"{part}_" for part in (kind, *owners)), ""


def key_path(folder: tuple[str, ...]) -> tuple[str, ...]:
    """The asset key path of the output in `folder` (its path under the data root, without an
    iteration's part): `("generations", "pool", "r0")` -> `(..., "generations_pool_r0")`."""
    if not _labelled(folder):
        return folder
    before, after = _around_last(folder[0], folder[1:-1])
    return (*folder[:-1], before + folder[-1] + after)


def folder_path(key: tuple[str, ...]) -> tuple[str, ...]:
    """The folder (under the data root) of the asset whose key path is `key`: `key_path`'s
    inverse. Raises for a generations or verdicts key whose label does not name its path."""
    if not _labelled(key):
        return key
    before, after = _around_last(key[0], key[1:-1])
    label = key[-1]
    last = label[len(before) : len(label) - len(after)]
    if not last or before + last + after != label:
        raise ValueError(
            f"asset key {'/'.join(key)}: the last part of a {key[0]} key is "
            f"{before}<cap or round>{after}, not {label}"
        )
    return (*key[:-1], last)


def legacy_key_path(key: tuple[str, ...]) -> tuple[str, ...] | None:
    """The key path `key`'s outputs were materialized under before generations, verdicts and
    statement audits were labelled (release 0.1.0): its folder's path; None for a key that was
    never renamed. Their check evaluations and materializations are read under it until
    release 0.3.0."""
    folder = folder_path(key)
    return None if folder == key else folder
