"""selectjit.Engine: tiers, threads, stats."""

import os

import numpy as np
import pytest

import selectjit
from conftest import assert_same

STATS = {"capacity", "len", "hits", "misses", "generic_runs", "evictions", "compiles",
         "compile_us", "generic_compiles", "generic_compile_us", "compile_failures",
         "generic_len", "aot_exact_runs", "aot_generic_runs", "static_runs",
         "aot_exact_kernels", "aot_generic_kernels", "tier_trials", "trial_calls",
         "trial_excess_ns", "trial_compiles", "trial_compile_us", "blocked_runs",
         "nway_pass_runs", "nway_compiles", "nway_compile_us"}


def available(tier):
    try:
        selectjit.Engine(tier=tier)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("tier", ["auto", "cranelift", "avx2", "avx512"])
def test_tiers(tier):
    if not available(tier):
        with pytest.raises(ValueError, match=tier):
            selectjit.Engine(tier=tier)
        # As the Rust tests' skips (tests/common/skip.rs): an x86 tier the host lacks fails
        # under SELECTJIT_REQUIRE_ALL_TIERS=1 (as .ci/run sets; the CI host has AVX-512).
        if tier in ("avx2", "avx512") and os.environ.get("SELECTJIT_REQUIRE_ALL_TIERS") == "1":
            pytest.fail(f"tier {tier} is not available on this CPU and "
                        "SELECTJIT_REQUIRE_ALL_TIERS=1 requires it")
        pytest.skip(f"tier {tier} is not available on this CPU (ValueError checked)")
    e = selectjit.Engine(tier=tier, threads=1)
    assert e.threads == 1
    assert e.tier in ("cranelift", "avx2", "avx512")
    if tier != "auto":
        assert e.tier == tier
    rng = np.random.default_rng(0)
    for shape in [(17,), (4, 33), (3, 1, 65)]:
        c = rng.random(shape) < 0.5
        x = rng.standard_normal(shape).astype(np.float32)
        for _ in range(3):  # generic kernel, then the compiled one, then a cache hit
            assert_same(e.where(c, x, x[..., ::-1]), np.where(c, x, x[..., ::-1]))
    s = e.stats()
    assert set(s) == STATS
    assert s["compiles"] >= 1 and s["hits"] >= 1 and s["compile_failures"] == 0


def test_unknown_tier_and_bad_threads():
    with pytest.raises(ValueError, match="unknown tier"):
        selectjit.Engine(tier="sse9")
    with pytest.raises(ValueError, match="threads"):
        selectjit.Engine(threads=0)
    with pytest.raises((TypeError, OverflowError)):
        selectjit.Engine(threads=-1)


def test_stats_count_calls():
    e = selectjit.Engine(threads=1)
    before = e.stats()
    assert before["compiles"] == 0 and before["hits"] == 0
    c = np.ones(100, bool)
    x = np.arange(100.0)
    for _ in range(5):
        e.where(c, x, -x)
    after = e.stats()
    assert after["hits"] + after["generic_runs"] + after["misses"] >= 5
    assert after["compiles"] == 1
    assert all(isinstance(v, int) for v in after.values())


def test_auto_measures_and_reports_its_choice():
    e = selectjit.Engine(threads=1)
    c = np.random.default_rng(1).random(4096) < 0.5
    x = np.arange(4096, dtype=np.float32)
    for _ in range(60):
        assert_same(e.where(c, x, -x), np.where(c, x, -x))
    s = e.stats()
    choices = e.tier_choices()
    assert len(choices) == s["tier_trials"]
    if s["tier_trials"]:
        assert s["trial_calls"] >= 4 and "us" in choices[0]


def test_default_engine_is_shared():
    a, b = selectjit.default_engine(), selectjit.default_engine()
    assert a is b
    n = a.stats()["hits"]
    c = np.ones(50, bool)
    for _ in range(4):
        selectjit.where(c, np.zeros(50), np.ones(50))
    assert a.stats()["hits"] > n
    assert "Engine" in repr(a)


def test_engine_where_has_the_same_signature():
    e = selectjit.Engine()
    out = np.empty(3)
    r = e.where([1, 0, 1], np.arange(3.0), 9.0, out=out, broadcast="numpy", axis=-1)
    assert r is out and out.tolist() == [0.0, 9.0, 2.0]
    with pytest.raises(TypeError):
        e.where(condition=[1], x=1, y=2)
    # One argument is numpy's where(condition); one of x, y alone is numpy's ValueError.
    got = selectjit.where([1, 0, 2])
    assert type(got) is tuple and [a.tolist() for a in got] == [[0, 2]]
    with pytest.raises(ValueError):
        selectjit.where([1, 0], 1)
    with pytest.raises(ValueError):
        e.where([1, 0], 1)
