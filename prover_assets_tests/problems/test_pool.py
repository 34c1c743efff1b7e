"""The pool candidates builder on real pool statements with planted contaminants."""

import json
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from prover_assets.config import PoolSpec
from prover_assets.lean.statements import alpha_sha, statement_sha
from prover_assets.problems.decontamination import (
    DecontaminationSets,
    build_decontamination_sets,
    informal_tokens,
    ngram_hashes,
)
from prover_assets.problems.eval_sets import load_minif2f, load_mobench
from prover_assets.problems.pool import (
    PoolInputError,
    build_pool_candidates,
    check_shards,
    rank_key,
)
from prover_assets.records import publish_records, sha256_file
from prover_assets_tests.pool_fixtures import POOL_HEADER, goedel_pset_rows, write_shards

DATA = Path(__file__).parents[2] / "prover_assets/data/goedel-prover-v2"


@pytest.fixture(scope="module")
def eval_problems():
    minif2f = load_minif2f(DATA / "minif2f.jsonl")
    # The registered S2 reading: 225 problems are unsupported, and only the all-MOBench
    # informal layer knows their texts.
    mobench, unsupported = load_mobench(DATA / "MOBench.jsonl", preambles=False)
    return minif2f, mobench, unsupported


@pytest.fixture(scope="module")
def sets(eval_problems) -> DecontaminationSets:
    minif2f, mobench, unsupported = eval_problems
    informal = [p.informal_prefix for p in mobench] + [u.informal_prefix for u in unsupported]
    return build_decontamination_sets(minif2f + mobench, informal, long_ngram=13, short_ngram=8)


@pytest.fixture(scope="module")
def real_rows():
    return goedel_pset_rows()


def spec(**overrides) -> PoolSpec:
    fields = {
        "dataset": "test/pool",
        "revision": "r",
        "shards": [{"path": "x", "sha256": "0" * 64}],
        "seed": 20261012,
        "candidates": 100_000,
        "size": 10,
        "workers": 1,
        "batch_rows": 1000,
    }
    fields.update(overrides)
    return PoolSpec(**fields)


def theorem_of(problem) -> str:
    return problem.formal_statement[problem.formal_statement.index("theorem") :]


def plants(eval_problems) -> list[dict]:
    """One contaminant per layer, each built so that the earlier layers cannot catch it."""
    minif2f, mobench, unsupported = eval_problems
    by_id = {p.problem_id: p for p in minif2f}

    renamed = theorem_of(by_id["mathd_algebra_478"]).replace("mathd_algebra_478", "pool_thm_one", 1)

    source = theorem_of(by_id["amc12a_2002_p6"])
    alpha = re.sub(r"\bm\b", "k", re.sub(r"\bp\b", "q", source)).replace(
        "amc12a_2002_p6", "pool_thm_two", 1
    )
    # The bound names differ, so the plain signature hash cannot see it; only alpha_sha can.
    assert statement_sha(alpha) != by_id["amc12a_2002_p6"].statement_sha
    assert alpha_sha(alpha) == by_id["amc12a_2002_p6"].alpha_sha

    embedding = "theorem imo_1969_p2_generalised (a b : ℕ) (h : a + b = 7) : b + a = 7 := by sorry"

    informal_source = by_id["mathd_numbertheory_233"].informal_prefix
    respaced = (
        informal_source.replace("$", "$ ").replace(" = ", "=").replace("\\equiv", "\\, \\equiv\\;")
    )
    assert respaced != informal_source
    assert informal_tokens(respaced) == informal_tokens(informal_source)

    scored = build_decontamination_sets(minif2f + mobench, [], long_ngram=13, short_ngram=8)
    mobench_text = next(
        u.informal_prefix
        for u in unsupported
        if not ngram_hashes(informal_tokens(u.informal_prefix), 8) & scored.scored_short
    )  # an unsupported problem's text that only the all-MOBench layer knows
    return [
        {
            "problem_id": "planted-statement",
            "formal_statement": POOL_HEADER + renamed,
            "informal_statement": None,
            "source": "planted",
        },
        {
            "problem_id": "planted-alpha",
            "formal_statement": POOL_HEADER + alpha,
            "informal_statement": None,
            "source": "planted",
        },
        {
            "problem_id": "planted-name",
            "formal_statement": POOL_HEADER + embedding,
            "informal_statement": None,
            "source": "planted",
        },
        {
            "problem_id": "planted-informal",
            "formal_statement": POOL_HEADER
            + "theorem pool_thm_four (x : ℕ) (h : x % 7 = 3) : (x + 7) % 7 = 3 := by sorry",
            "informal_statement": respaced,
            "source": "planted",
        },
        {
            "problem_id": "planted-mobench",
            "formal_statement": POOL_HEADER
            + "theorem pool_thm_five (y : ℤ) (h : y = 2) : y * y = 4 := by sorry",
            "informal_statement": mobench_text,
            "source": "planted",
        },
    ]


def build(rows, tmp_path, sets, **spec_overrides):
    paths = write_shards(rows, tmp_path / "shards", **spec_overrides.pop("shard_args", {}))
    return build_pool_candidates(paths, spec(**spec_overrides), sets)


REFERENCE_ROWS, REFERENCE_K = 4000, 300


@pytest.fixture(scope="module")
def reference(real_rows, sets, tmp_path_factory):
    """The first 4,000 real rows built as one shard by one worker, K = 300: what the builds of
    other orders, shardings, workers and a killed run are held to."""
    rows = real_rows[:REFERENCE_ROWS]
    return build(rows, tmp_path_factory.mktemp("reference"), sets, candidates=REFERENCE_K)


@pytest.mark.slow
def test_each_planted_contaminant_is_caught_by_its_own_layer(
    real_rows, eval_problems, sets, tmp_path
):
    rows = real_rows[:2000] + real_rows[-600:]  # Lean Workbook and the texts with informal parts
    clean = build(rows, tmp_path / "clean", sets).counts
    planted = plants(eval_problems)
    result = build(rows + planted, tmp_path / "planted", sets)
    counts = result.counts
    assert counts.decontam_statement_sha - clean.decontam_statement_sha == 1
    assert counts.decontam_alpha_sha - clean.decontam_alpha_sha == 1
    assert counts.decontam_name - clean.decontam_name == 1
    assert (counts.decontam_informal_long + counts.decontam_informal_short) - (
        clean.decontam_informal_long + clean.decontam_informal_short
    ) == 1
    assert counts.decontam_mobench_informal - clean.decontam_mobench_informal == 1
    kept = {problem.problem_id for problem in result.candidates}
    assert not kept & {row["problem_id"] for row in planted}


@pytest.mark.slow
def test_counts_reconcile_on_real_rows(real_rows, sets, tmp_path):
    counts = build(real_rows, tmp_path, sets, candidates=500).counts
    assert counts.rows_in == len(real_rows)
    assert counts.rows_in == counts.written + counts.dropped()
    assert counts.written <= 500
    assert counts.beyond_k > 0


def test_unsupported_and_malformed_rows_are_counted_by_reason(sets, tmp_path):
    rows = [
        {
            "problem_id": "a",
            "formal_statement": POOL_HEADER + "theorem a : True := by trivial",
            "informal_statement": None,
            "source": "s",
        },
        {
            "problem_id": "b",
            "formal_statement": POOL_HEADER + "axiom f : ℕ\ntheorem b : f = 1 := by sorry",
            "informal_statement": None,
            "source": "s",
        },
        {
            "problem_id": "c",
            "formal_statement": POOL_HEADER + "theorem c : True := by sorry" + " " * 4000,
            "informal_statement": None,
            "source": "s",
        },
        {
            "problem_id": "d",
            "formal_statement": POOL_HEADER
            + "theorem d (sorry_x : ℕ) : sorry_x = sorry_x := by sorry",
            "informal_statement": None,
            "source": "s",
        },
        {
            "problem_id": "e",
            "formal_statement": POOL_HEADER + "theorem e (n : ℕ) : n = n := by sorry",
            "informal_statement": None,
            "source": "s",
        },
    ]
    result = build(rows, tmp_path, sets)
    counts = result.counts
    assert (
        counts.not_bare_statement,
        dict(counts.unsupported_shape),
        counts.too_long,
        counts.sorry_not_once,
        counts.written,
    ) == (1, {"preamble": 1}, 1, 1, 1)
    assert [p.problem_id for p in result.candidates] == ["e"]
    assert counts.drops() == {
        "not_bare_statement": 1,
        "too_long": 1,
        "sorry_not_once": 1,
        "unsupported_shape:preamble": 1,
    }
    assert counts.dropped() == 4


def _row(problem_id: str, theorem: str, header: str = POOL_HEADER) -> dict:
    return {
        "problem_id": problem_id,
        "formal_statement": header + theorem,
        "informal_statement": None,
        "source": "s",
    }


def test_a_sorry_outside_the_proof_drops_the_row_and_one_in_a_comment_does_not_count(
    sets, tmp_path
):
    rows = [
        # Goedel-Pset-1662008's shape: `sorry`s as the Fin bounds' proofs, in the signature.
        _row("fin", "theorem fin (f : Fin 3 → ℕ) : f ⟨0, sorry⟩ + f ⟨1, sorry⟩ = 0 := by sorry"),
        # Goedel's re-insertion deletes every `sorry` before the proof, in a string too, so that
        # Lean would check `"".length = 0`: the row must go.
        _row("string", 'theorem string : "sorry".length = 0 := by sorry'),
        _row("comment", "theorem comment (n : ℕ) -- no sorry here\n    : n = n := by sorry"),
        _row(
            "block", "/- sorry, says the author -/\ntheorem block (n : ℕ) : n + 0 = n := by sorry"
        ),
    ]
    result = build(rows, tmp_path, sets)
    assert result.counts.sorry_not_once == 2
    assert sorted(p.problem_id for p in result.candidates) == ["block", "comment"]


def test_a_statement_whose_decimals_elaborate_as_float_is_dropped_and_counted(sets, tmp_path):
    rows = [
        _row("floats", "theorem floats (h : (1 - 0.3) * 0.8 = 0.56) : 2.5 * 2 = 5 := by sorry"),
        _row("reals", "theorem reals (x : ℝ) (h : x = 2.5) : 2 * x = 5 := by sorry"),
        _row("typed", "theorem typed : (2.5 : ℝ) * 2 = 5 := by sorry"),
    ]
    dropped = build(rows, tmp_path / "drop", sets)
    assert (dropped.counts.float_numerals, dropped.counts.float_numerals_kept) == (1, 0)
    assert sorted(p.problem_id for p in dropped.candidates) == ["reals", "typed"]
    assert ("less decimals that elaborate as Float (-1)", 2) in dropped.counts.to_result().funnel()
    kept = build(rows, tmp_path / "keep", sets, float_numerals="keep")
    assert (kept.counts.float_numerals, kept.counts.float_numerals_kept) == (0, 1)
    assert len(kept.candidates) == 3


def test_a_pool_statement_with_a_preamble_is_kept_and_hashed_with_it(sets, tmp_path):
    theorem = "theorem with_def : f = 1 := by sorry"
    result = build([_row("with_def", "def f : ℕ := 1\n" + theorem)], tmp_path, sets)
    (problem,) = result.candidates
    assert problem.statement_sha == statement_sha(problem.formal_statement)
    assert problem.statement_sha != statement_sha(POOL_HEADER + theorem)


def test_candidates_are_in_rank_order(real_rows, sets, tmp_path):
    result = build(real_rows[:3000], tmp_path, sets, candidates=200)
    keys = [rank_key(20261012, p.problem_id) for p in result.candidates]
    assert keys == sorted(keys)


@pytest.mark.slow
def test_sampler_is_independent_of_row_order_and_sharding(real_rows, sets, reference, tmp_path):
    shuffled = list(real_rows[:REFERENCE_ROWS])
    random.Random(5).shuffle(shuffled)
    other = build(
        shuffled,
        tmp_path,
        sets,
        candidates=REFERENCE_K,
        shard_args={"shards": 3, "row_group_size": 333},
    )
    assert [p.problem_id for p in other.candidates] == [p.problem_id for p in reference.candidates]
    assert other.counts.to_result() == reference.counts.to_result()


@pytest.mark.slow
def test_two_worker_processes_give_the_same_candidates(real_rows, sets, reference, tmp_path):
    two = build(
        real_rows[:REFERENCE_ROWS],
        tmp_path,
        sets,
        candidates=REFERENCE_K,
        workers=2,
        shard_args={"shards": 2, "row_group_size": 500},
    )
    assert [p.problem_id for p in two.candidates] == [p.problem_id for p in reference.candidates]
    assert two.counts.to_result() == reference.counts.to_result()


def test_wrong_shard_sha256_raises_before_reading(tmp_path):
    path = tmp_path / "shard.parquet"
    path.write_bytes(b"not even parquet")
    with pytest.raises(PoolInputError, match=r"expected 0{64}.*nothing was read"):
        check_shards([(path, "0" * 64)])
    assert check_shards([(path, sha256_file(path))]) == {str(path): sha256_file(path)}


def test_duplicate_problem_ids_in_the_kept_set_raise(sets, tmp_path):
    row = {
        "problem_id": "same",
        "formal_statement": POOL_HEADER + "theorem s (n : ℕ) : n = n := by sorry",
        "informal_statement": None,
        "source": "s",
    }
    other = dict(row, formal_statement=row["formal_statement"].replace("n = n", "n + 0 = n"))
    with pytest.raises(PoolInputError, match="duplicate problem_id"):
        build([row, other], tmp_path, sets)


def test_missing_column_is_a_clear_error(sets, tmp_path):
    with pytest.raises(PoolInputError, match="missing columns"):
        build(
            [
                {
                    "problem_id": "a",
                    "formal_statement": "x",
                    "informal_statement": None,
                    "source": "s",
                }
            ],
            tmp_path,
            sets,
            columns={"problem_id": "id"},
        )


KILL_SCRIPT = """
import json, logging, sys
sys.path.insert(0, {root!r})
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
from prover_assets.config import PoolSpec
from prover_assets.problems.decontamination import DecontaminationSets
from prover_assets.problems.pool import build_pool_candidates
from prover_assets.records import publish_records
sets = DecontaminationSets.from_json(json.load(open({sets!r})))
spec = PoolSpec(**json.load(open({spec!r})))
build = build_pool_candidates([__import__("pathlib").Path(p) for p in {shards!r}], spec, sets,
                              progress=lambda done, total: print("PROGRESS", done, total, flush=True))
publish_records({out!r}, build.candidates)
"""


@pytest.mark.slow
def test_kill_9_during_a_build_then_rerun_gives_the_same_bytes(
    real_rows, sets, reference, tmp_path
):
    rows = real_rows[:REFERENCE_ROWS]
    shards = [str(p) for p in write_shards(rows, tmp_path / "shards", shards=4, row_group_size=250)]
    (tmp_path / "sets.json").write_text(json.dumps(sets.to_json()))
    pool_spec = spec(candidates=REFERENCE_K).model_dump()
    (tmp_path / "spec.json").write_text(json.dumps(pool_spec))
    out = tmp_path / "train_pool_candidates.jsonl"
    script = KILL_SCRIPT.format(
        root=str(Path(__file__).parents[2]),
        sets=str(tmp_path / "sets.json"),
        spec=str(tmp_path / "spec.json"),
        shards=shards,
        out=str(out),
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for line in process.stdout:
        if line.startswith("PROGRESS"):
            process.send_signal(signal.SIGKILL)
            break
    process.wait()
    assert process.returncode == -9
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    rerun = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    expected = tmp_path / "reference.jsonl"  # the one-shard build's candidates, as published
    publish_records(expected, reference.candidates)
    assert out.read_bytes() == expected.read_bytes()


def test_a_pool_item_with_a_mobench_preamble_and_theorem_is_caught_by_its_statement_hash(tmp_path):
    minif2f = load_minif2f(DATA / "minif2f.jsonl")
    mobench, _ = load_mobench(DATA / "MOBench.jsonl")
    whole = build_decontamination_sets(minif2f + mobench, [], long_ngram=13, short_ngram=8)
    (source,) = [p for p in mobench if p.problem_id == "Imo2006P3"]
    renamed = source.formal_statement.replace("theorem imo2006_p3", "theorem pool_answer_bound")
    other_answer = renamed.replace("9 * Real.sqrt 2 / 32", "9 * Real.sqrt 2 / 31")
    result = build(
        [_row("same", renamed, header=""), _row("other", other_answer, header="")],
        tmp_path,
        whole,
    )
    assert result.counts.decontam_statement_sha == 1
    assert [p.problem_id for p in result.candidates] == ["other"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("problem_id", "", "row 4: problem_id '' is empty, padded with whitespace or holds a"),
        ("problem_id", " p4", "row 4: problem_id ' p4' is empty, padded with whitespace"),
        ("problem_id", "p\ufeff4", "row 4: problem_id 'p\\ufeff4' is empty, padded with"),
        ("problem_id", None, "row 4: problem_id is None, not a string"),
        ("formal_statement", None, "row 4 (p4): formal_statement is NoneType, not a string"),
    ],
    ids=["empty_id", "padded_id", "bom_in_id", "null_id", "null_statement"],
)
def test_a_bad_row_names_its_shard_row_and_column(sets, tmp_path, field, value, message):
    rows = [
        _row(f"p{i}", f"theorem t{i} (n : ℕ) : n + {i} = {i} + n := by sorry") for i in range(6)
    ]
    rows[4][field] = value
    # Three row groups of two, one scan task each: row 4 is the third group's first.
    with pytest.raises(PoolInputError) as refused:
        build(rows, tmp_path, sets, shard_args={"row_group_size": 2})
    (shard,) = (tmp_path / "shards").iterdir()
    assert str(refused.value) == f"{shard}: {message}" or str(refused.value).startswith(
        f"{shard}: {message}"
    )


@pytest.mark.parametrize("damage", ["bom", "truncated"])
def test_a_shard_that_is_not_parquet_is_refused_naming_it(sets, tmp_path, damage):
    rows = [_row("p0", "theorem t (n : ℕ) : n = n := by sorry")]
    (shard,) = write_shards(rows, tmp_path / "shards")
    data = shard.read_bytes()
    shard.write_bytes(b"\xef\xbb\xbf" + data if damage == "bom" else data[: len(data) // 2])
    with pytest.raises(PoolInputError, match=rf"^{re.escape(str(shard))}: not a readable parquet"):
        build_pool_candidates([shard], spec(), sets)


def test_the_funnel_says_each_layer_in_words_with_the_rows_it_took():
    from collections import Counter

    from prover_assets.problems.pool import PoolCounts

    counts = PoolCounts(
        rows_in=100,
        beyond_k=50,
        decontam_alpha_sha=3,
        unsupported_shape=Counter({"namespace": 2}),
        written=45,
    )
    assert counts.to_result().funnel() == [
        ("rows read", 100),  # then each layer in the order the build applies them
        ("less an eval statement, renamed (-3)", 97),
        ("less ranked past the K kept (-50)", 47),
        ("less unsupported shape namespace (-2)", 45),
        ("candidates kept", 45),
    ]
