"""Count the honest proofs the verifier refuses before Lean (gate or re-insertion).

Usage: python scripts/false_rejections.py [DATA_ROOT]   (default: prover_assets_tests/data)

DATA_ROOT has the layout of the shared data (its README): the Goedel-Prover proofs of the Kimina
fixtures are judged as they are, against their statements by Goedel's own prompt rule; every
statement of the evaluation sets and the pool sources is judged with its `sorry` replaced by
`norm_num`, the candidate's header being the statement's own. A statement the pipeline does not
support (its shape, or re-insertion changing it) is no candidate and is skipped. Prints one line
per source, the count judged and refused and the first reasons, then the total.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from prover_assets.lean.extract import ReinsertionError, lean_input, reinsertion_keeps_statement
from prover_assets.lean.gate import static_check
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.statements import StatementError, normalise_statement, parse_statement

Candidate = tuple[str, str, str]  # (name, trusted statement, code as extraction makes it)


def refusal(statement: str, code: str) -> str | None:
    """The first reason the verifier gives before Lean, or None when the code reaches Lean."""
    reasons = static_check(code, statement=statement)
    if reasons:
        return reasons[0]
    try:
        lean_input(statement, code)
    except ReinsertionError as exc:
        return f"reinsertion:{exc.reason}"
    return None


def _statement(text: str) -> str | None:
    """The trusted statement of a source row (`:= by`, `:=` or `:= by sorry` endings), or None
    when the pipeline does not support it."""
    text = text.rstrip()
    if text.endswith(":="):
        text += " by"
    if text.endswith(":= by"):
        text += " sorry"
    try:
        statement = normalise_statement(text)
    except StatementError:
        return None
    if not parse_statement(statement).supported or not reinsertion_keeps_statement(statement):
        return None
    return statement


def _with_header(row: dict, field: str) -> str:
    header, text = row.get("header") or "", row[field]
    return text if "import" in text or not header else f"{header}\n{text}"


def _synthetic(rows: Iterable[tuple[str, str]]) -> Iterator[Candidate]:
    for name, text in rows:
        statement = _statement(text)
        if statement is not None:
            proof = statement.removesuffix("sorry") + "\n  norm_num"
            yield name, statement, GOEDEL_HEADER + proof


def _jsonl(path: Path, field: str) -> Iterator[tuple[str, str]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        yield row.get("name") or row.get("id"), _with_header(row, field)


def _goedel_proofs(root: Path) -> Iterator[Candidate]:
    for path in sorted((root / "repl-fixtures/kimina-lean-server/input").glob("*.lean")):
        code = path.read_text(encoding="utf-8")
        yield path.stem, code.split(":= by")[0] + ":= by sorry", GOEDEL_HEADER + code


def sources(root: Path) -> Iterator[tuple[str, Iterable[Candidate]]]:
    """Each source of honest candidates under `root`, by name."""
    yield "Goedel-Prover proofs", _goedel_proofs(root)
    evaluation = root / "goedel-prover-v2"
    if evaluation.is_dir():
        for name in ("minif2f.jsonl", "MOBench.jsonl"):
            yield name, _synthetic(_jsonl(evaluation / name, "formal_statement"))
    pool = root / "pool-sources"
    for path in sorted(pool.glob("*.jsonl")):
        yield path.name, _synthetic(_jsonl(path, "formal_statement"))
    formal_math = pool / "FormalMATH_lite.json"
    rows = json.loads(formal_math.read_text(encoding="utf-8"))
    yield formal_math.name, _synthetic((r["theorem_names"], r["autoformalization"]) for r in rows)


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path("prover_assets_tests/data")
    total = refused = 0
    for name, candidates in sources(root):
        reasons: Counter[str] = Counter()
        judged = 0
        for _, statement, code in candidates:
            judged += 1
            if (reason := refusal(statement, code)) is not None:
                reasons[reason] += 1
        total, refused = total + judged, refused + sum(reasons.values())
        print(
            f"{name}: {judged} judged, {sum(reasons.values())} refused {dict(reasons.most_common(5))}"
        )
    print(f"total: {total} honest candidates, {refused} refused before Lean")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
