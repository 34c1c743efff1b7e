"""The verdict cache: nothing verified twice, within a batch or across runs, and no entry used
that is not exactly the key's (the REPL double's log says what Lean was asked)."""

import json
from pathlib import Path

import prover_assets.verify.verifier as verifier_module
from prover_assets.records import Stage
from prover_assets.verify.cache import VerdictCache, cache_key
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.factories import make_generation, make_problem
from prover_assets_tests.lean_double import double_backend, repl_log

PROOF = "plan\n```lean4\ntheorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by\n  {}\n```"


def sample(index: int, tactic: str = "omega"):
    return make_generation(sample_idx=index, completion_text=PROOF.format(tactic))


def proofs_sent(folder) -> int:
    return sum(
        1
        for entry in repl_log(folder)
        if entry["request"].get("env") is not None
        and "theorem t" in entry["request"]["cmd"]
        and not entry["request"]["cmd"].startswith(("#print", "example"))
    )


def run(folder, cache, generations, rules=None, **policy):
    """Verify on the double whose rules and log are in `folder` (its command, and so the
    verifier's config, is the same for every run in the same folder)."""
    problem = make_problem()
    with double_backend(folder, rules) as backend:
        verifier = StrictVerifier(
            backend, VerifierPolicy(budget_s=1.0, feedback=False, **policy), cache
        )
        return verifier, list(verifier.verify_stream([(problem, g) for g in generations]))


def test_duplicates_within_a_batch_share_one_lean_run_and_point_at_it(tmp_path):
    verifier, verdicts = run(tmp_path, None, [sample(0), sample(1), sample(2, "simp")])
    assert proofs_sent(tmp_path) == 2
    assert verifier.batch_duplicates == 1
    by_index = {v.sample_idx: v for v in verdicts}
    assert by_index[0].cached_from is None and by_index[2].cached_from is None
    pointer = by_index[1].cached_from
    assert (pointer.problem_id, pointer.sample_idx) == ("p1", 0)
    assert by_index[1].model_dump(exclude={"sample_idx", "cached_from"}) == by_index[0].model_dump(
        exclude={"sample_idx", "cached_from"}
    )


def test_a_later_run_of_the_same_verifier_is_answered_by_the_cache(tmp_path):
    cache = VerdictCache(tmp_path / "cache")
    _, first = run(tmp_path, cache, [sample(0)])
    later = VerdictCache(tmp_path / "cache")
    verifier, (again,) = run(tmp_path, later, [sample(5)])
    assert again.verifier == verifier.info
    assert proofs_sent(tmp_path) == 1
    assert (later.hits, later.refused) == (1, 0)
    assert (again.sample_idx, again.cached_from.sample_idx) == (5, 0)
    assert again.cached_from.key == cache_key(
        first[0].verifier, make_problem().formal_statement, first[0].code_sha256
    )
    assert (again.stage, again.reasons) == (first[0].stage, first[0].reasons)


def test_another_config_is_another_key_and_is_verified_again(tmp_path):
    cache = VerdictCache(tmp_path / "cache")
    run(tmp_path, cache, [sample(0)])
    run(tmp_path, cache, [sample(0)], statement_check="record")
    assert proofs_sent(tmp_path) == 2


def test_a_verifier_of_other_rules_is_another_key_and_verifies_again(tmp_path, monkeypatch):
    cache = VerdictCache(tmp_path / "cache")
    run(tmp_path, cache, [sample(0)])
    # The gate's, the statement check's, ... code changed: not the verifier that judged it.
    monkeypatch.setattr(verifier_module, "rules_sha256", lambda: "0" * 64)
    verifier, _ = run(tmp_path, cache, [sample(0)])
    assert verifier.info.config["rules_sha256"] == "0" * 64
    assert proofs_sent(tmp_path) == 2


def entry_path(cache: VerdictCache):
    (path,) = list(cache.root.rglob("*.json"))
    return path


def test_an_entry_of_other_pins_under_the_key_is_refused_and_the_proof_verified(tmp_path):
    cache = VerdictCache(tmp_path / "cache")
    run(tmp_path, cache, [sample(0)])
    path = entry_path(cache)
    entry = json.loads(path.read_text())
    entry["inputs"]["pins"]["mathlib_rev"] = "0" * 40
    entry["verdict"]["verifier"]["pins"]["mathlib_rev"] = "0" * 40
    path.write_text(json.dumps(entry))
    later = VerdictCache(tmp_path / "cache")
    _, (verdict,) = run(tmp_path, later, [sample(0)])
    assert (later.hits, later.refused) == (0, 1)
    assert proofs_sent(tmp_path) == 2
    assert verdict.cached_from is None and verdict.accepted


def test_an_entry_with_a_flipped_byte_is_refused(tmp_path):
    cache = VerdictCache(tmp_path / "cache")
    run(tmp_path, cache, [sample(0)])
    path = entry_path(cache)
    data = bytearray(path.read_bytes())
    data[data.index(b'"accepted": true') + len(b'"accepted": ')] = ord("T")
    path.write_bytes(bytes(data))
    later = VerdictCache(tmp_path / "cache")
    run(tmp_path, later, [sample(0)])
    assert (later.hits, later.refused) == (0, 1)
    assert proofs_sent(tmp_path) == 2


def test_timeouts_and_infrastructure_are_never_cached(tmp_path):
    cache = VerdictCache(tmp_path / "cache")
    hang = [{"match": {"substring": "aesop"}, "action": "hang"}]
    crash = [{"match": {"substring": "simp"}, "action": "crash"}]
    _, (timeout,) = run(tmp_path / "one", cache, [sample(0, "aesop")], hang, recheck_timeouts=False)
    _, (dead,) = run(tmp_path / "two", cache, [sample(1, "simp")], crash)
    assert (timeout.stage, dead.stage) == (Stage.TIMEOUT, Stage.INFRASTRUCTURE)
    assert not list(cache.root.rglob("*.json"))


def test_three_samples_of_one_proof_are_one_run_and_two_copies_of_it(tmp_path):
    verifier, verdicts = run(tmp_path, None, [sample(0), sample(1), sample(2)])
    assert proofs_sent(tmp_path) == 1
    assert verifier.batch_duplicates == 2
    assert [v.sample_idx for v in verdicts] == [0, 1, 2]
    assert [v.cached_from and v.cached_from.sample_idx for v in verdicts] == [None, 0, 0]


def test_a_copy_takes_the_identity_of_its_own_sample_and_the_verifier_that_copied_it(tmp_path):
    from prover_assets.verify.cache import copy_for

    cache = VerdictCache(tmp_path / "cache")
    _, (original,) = run(tmp_path, cache, [sample(0)])
    other = make_generation(
        "p9", sample_idx=3, round=1, cap_tokens=128, completion_text=PROOF.format("omega")
    )
    info = original.verifier.model_copy(update={"workers": original.verifier.workers + 6})
    copy = copy_for(original, other.key, "f" * 64, info)
    assert copy.key == other.key
    assert copy.verifier.workers == original.verifier.workers + 6
    assert copy.cached_from.model_dump() == {
        "key": "f" * 64,
        "problem_id": "p1",
        "sample_idx": 0,
        "round": 0,
        "cap_tokens": original.cap_tokens,
    }
    assert (copy.stage, copy.reasons, copy.code_sha256) == (
        original.stage,
        original.reasons,
        original.code_sha256,
    )


def test_every_hit_and_every_refusal_is_counted(tmp_path):
    cache = VerdictCache(tmp_path / "cache")
    run(tmp_path, cache, [sample(0), sample(1, "simp")])
    later = VerdictCache(tmp_path / "cache")
    run(tmp_path, later, [sample(2), sample(3, "simp")])
    assert (later.hits, later.refused) == (2, 0)
    for path in cache.root.rglob("*.json"):
        path.write_text("{}")
    refusing = VerdictCache(tmp_path / "cache")
    run(tmp_path, refusing, [sample(4), sample(5, "simp")])
    assert (refusing.hits, refusing.refused) == (0, 2)


def test_the_key_is_the_sha256_of_the_compact_sorted_json_of_its_inputs(tmp_path):
    import hashlib

    _, (verdict,) = run(tmp_path, None, [sample(0)])
    statement = make_problem().formal_statement
    config = {k: v for k, v in verdict.verifier.config.items() if k != "workers"}
    inputs = {
        "code_sha256": verdict.code_sha256,
        "config": config,
        "pins": verdict.verifier.pins.model_dump(mode="json"),
        "statement_sha256": hashlib.sha256(statement.encode()).hexdigest(),
    }
    text = json.dumps(inputs, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    expected = hashlib.sha256(text.encode()).hexdigest()
    assert cache_key(verdict.verifier, statement, verdict.code_sha256) == expected


def test_a_verdict_is_stored_only_under_its_own_key(tmp_path):
    import pytest

    _, (verdict,) = run(tmp_path, None, [sample(0)])
    with pytest.raises(ValueError, match=r"is not the verdict of key 0{64}$"):
        VerdictCache(tmp_path / "cache").put("0" * 64, verdict, make_problem().formal_statement)


def test_every_gate_data_file_is_part_of_the_verifiers_identity():
    """A data file the gate reads changes its verdicts: editing one alone must change the
    digest every cached verdict is keyed by."""
    package = Path(verifier_module.__file__).parents[1]
    data = {str(p.relative_to(package)) for p in (package / "data" / "gate").glob("*.jsonl")}
    assert data and data <= set(verifier_module.RULES_MODULES)


# Lean modules the verifier imports that decide no verdict, each with why: what they do is
# recorded apart in the verdict's config.
NOT_RULES = {
    "lean/launch.py": "how the REPL process starts, recorded in the config as `repl_start`",
    "lean/memory_cap.py": "the memory cap's mechanism, recorded in the config as `memory_limit`",
}


def lean_modules_imported_by(module: str, package: Path) -> set[str]:
    """The `prover_assets.lean` modules `module` imports, directly or through other modules
    of the package, as paths relative to it."""
    import ast

    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = package / (name.removeprefix("prover_assets.").replace(".", "/") + ".py")
        if not path.exists():
            path = path.with_suffix("") / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "prover_assets."
            ):
                todo.append(node.module)
    return {
        name.removeprefix("prover_assets.").replace(".", "/") + ".py"
        for name in seen
        if name.startswith("prover_assets.lean.")
    }


def test_every_lean_module_the_verifier_imports_is_a_rule_or_says_why_not():
    package = Path(verifier_module.__file__).parents[1]
    imported = lean_modules_imported_by("prover_assets.verify.verifier", package)
    rules = {m for m in verifier_module.RULES_MODULES if m.startswith("lean/")}
    assert imported - rules == set(NOT_RULES)
    assert rules <= imported  # no rule module the verifier no longer reads
