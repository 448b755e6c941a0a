"""Outputs allocated through numpy's memory-handler API from the engine's pool of freed outputs:
the same results with the pool on and off, memory recycled within the cap, arrays that outlive
their engine or die on another thread, and the user's own arrays untouched."""

import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import selectjit
from conftest import assert_same

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # numpy 1.22 - 1.26
    from numpy.core.multiarray import get_handler_name

MIB = 1 << 20
HANDLER = "selectjit_output_pool"


def relu(engine, x):
    return engine.where(selectjit.greater(x, 0), x, 0)


def pooled(engine):
    s = engine.output_pool_stats()
    if not s["enabled"]:
        pytest.skip("this numpy has no memory-handler API (numpy < 1.22)")
    return s


@pytest.fixture
def pool_switch():
    """Restores the process-wide switch after a test that changes it."""
    before = selectjit.set_output_pool(True)
    selectjit.set_output_pool(before)
    yield
    selectjit.set_output_pool(before)


@pytest.mark.parametrize("pool", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.uint8, np.complex128])
def test_results_equal_numpy(pool, dtype):
    e = selectjit.Engine(threads=1, output_pool=pool)
    rng = np.random.default_rng(1)
    n = (3 * MIB) // np.dtype(dtype).itemsize + 5  # a pooled size, odd length
    x = rng.integers(-100, 100, n).astype(dtype)
    y = rng.integers(-100, 100, n).astype(dtype)
    c = rng.random(n) < 0.5
    for _ in range(3):  # a miss, then recycled memory
        got = e.where(c, x, y)
        assert_same(got, np.where(c, x, y))
        assert get_handler_name(got) == (HANDLER if pool and pooled(e) else get_handler_name(x))
        del got
    # A 2-D output in Fortran order (numpy's memory order is kept) and a predicate.
    xf = np.asfortranarray(rng.standard_normal((1024, 513)).astype(np.float32))
    got = e.where(selectjit.greater(xf, 0), xf, np.float32(0))
    assert_same(got, np.where(xf > 0, xf, np.float32(0)))
    s = e.output_pool_stats()
    if pool:
        assert s["hits"] >= 2 and s["misses"] >= 1, s
    else:
        assert not s["enabled"] and s["hits"] == 0 and s["cap_bytes"] == 0, s


def test_small_outputs_and_the_users_arrays_use_numpys_handler():
    e = selectjit.Engine(threads=1)
    pooled(e)
    default = get_handler_name(np.empty(4 * MIB, np.uint8))
    assert default != HANDLER
    small = e.where(np.ones(100, bool), np.arange(100.0), 0.0)
    assert get_handler_name(small) == default
    big = e.where(np.ones(MIB, bool), np.arange(float(MIB)), 0.0)
    assert get_handler_name(big) == HANDLER
    # The handler is set around our allocation only.
    assert get_handler_name(np.empty(4 * MIB, np.uint8)) == default
    assert get_handler_name(np.zeros(8 * MIB, np.uint8)) == default
    assert get_handler_name(big.copy()) == default
    assert get_handler_name(big + 1) == default
    # Views of a pooled output report their base's handler; their data stays the base's.
    v = big[::2]
    assert v.base is big and np.all(v == np.arange(0.0, MIB, 2))


def test_a_rebinding_loop_holds_at_most_one_output_per_size():
    e = selectjit.Engine(threads=1)
    pooled(e)
    x = np.random.default_rng(2).standard_normal(4 * MIB).astype(np.float32)  # 16 MiB
    want = np.where(x > 0, x, np.float32(0))
    y = None
    for _ in range(20):
        y = relu(e, x)
    assert_same(y, want)
    s = e.output_pool_stats()
    # Two outputs are alive at once (the old y until it is rebound): two misses, then hits.
    assert s["misses"] <= 2 and s["hits"] >= 18, s
    assert s["live_buffers"] == 1 and s["held_bytes"] <= s["cap_bytes"], s
    assert s["held_bytes"] <= 2 * 18 * MIB, s
    del y
    s = e.output_pool_stats()
    assert s["live_buffers"] == 0 and s["held_buffers"] <= 2, s


def test_the_cap_bounds_what_is_held():
    assert pooled(selectjit.Engine(threads=1))["cap_bytes"] == 1 << 30  # the default
    cap = 20 * MIB
    e = selectjit.Engine(threads=1, output_pool=cap)
    assert e.output_pool_stats()["cap_bytes"] == cap
    # Outputs of many sizes alive at once, then freed in turns: what is held stays under the cap.
    rng = np.random.default_rng(3)
    alive = []
    for i in range(40):
        k = int(rng.integers(1, 9))
        alive.append(e.where(np.ones(k * MIB + i, bool), np.uint8(1), np.uint8(0)))
        if i % 3:
            del alive[int(rng.integers(0, len(alive)))]
        s = e.output_pool_stats()
        assert s["held_bytes"] <= cap and s["live_buffers"] == len(alive), s
    del alive
    s = e.output_pool_stats()
    assert s["live_buffers"] == 0 and 0 < s["held_bytes"] <= cap, s
    assert s["released"] > 0 and s["hits"] > 0, s
    with pytest.raises(ValueError, match="output_pool"):
        selectjit.Engine(output_pool=-1)
    assert not selectjit.Engine(output_pool=0).output_pool_stats()["enabled"]


def test_trim_frees_what_is_held():
    e = selectjit.Engine(threads=1)
    pooled(e)
    a = relu(e, np.ones(2 * MIB, np.float32))
    b = relu(e, np.ones(3 * MIB, np.float32))
    del a
    s = e.output_pool_stats()
    assert s["held_buffers"] == 1 and s["live_buffers"] == 1, s
    e.trim_output_pool()
    s = e.output_pool_stats()
    assert s["held_bytes"] == 0 and s["held_buffers"] == 0 and s["live_buffers"] == 1, s
    assert np.all(b == 1)


def test_arrays_outlive_their_engine():
    e = selectjit.Engine(threads=1)
    pooled(e)
    x = np.arange(2 * MIB, dtype=np.float64) - MIB
    arrs = [relu(e, x) for _ in range(3)]
    del arrs[1]  # one held by the pool
    del e
    gc.collect()
    for a in arrs:
        assert get_handler_name(a) == HANDLER
        assert_same(a, np.where(x > 0, x, 0.0))
        a[:] = -1.0  # still writable memory
        assert np.all(a == -1.0)
        a.resize(3 * MIB, refcheck=False)  # numpy's realloc through the handler
        assert np.all(a[: 2 * MIB] == -1.0)
    del arrs
    gc.collect()


def test_arrays_freed_on_another_thread():
    e = selectjit.Engine(threads=1)
    pooled(e)
    x = np.arange(MIB, dtype=np.float32) - MIB / 2
    want = np.where(x > 0, x, np.float32(0))
    arrs = [relu(e, x) for _ in range(8)]
    errors = []

    def check_and_drop(batch):
        try:
            for a in batch:
                assert_same(a, want)
            batch.clear()  # the last references die on this thread
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    batches = [arrs[:4], arrs[4:]]
    del arrs
    threads = [threading.Thread(target=check_and_drop, args=(b,)) for b in batches]
    del batches
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    s = e.output_pool_stats()
    assert s["live_buffers"] == 0 and 0 < s["held_buffers"] <= 8, s
    # And engines used from several threads at once.
    results = [None] * 4

    def work(i):
        for _ in range(5):
            results[i] = relu(e, x + i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        assert_same(r, np.where(x + i > 0, x + i, np.float32(0)))


def test_the_process_wide_switch(pool_switch):
    e = selectjit.Engine(threads=1)
    pooled(e)
    x = np.ones(2 * MIB, np.float32)
    assert selectjit.set_output_pool(False) is True
    off = relu(e, x)
    assert get_handler_name(off) != HANDLER
    assert selectjit.set_output_pool(True) is False
    on = relu(e, x)
    assert get_handler_name(on) == HANDLER
    assert_same(off, on)


def test_the_default_engine_and_the_environment():
    s = selectjit.default_engine().output_pool_stats()
    assert set(s) == {"enabled", "cap_bytes", "held_bytes", "held_buffers", "live_bytes",
                      "live_buffers", "hits", "misses", "direct", "released"}
    # SELECTJIT_OUTPUT_POOL=0 switches the pool off, for the default engine and for new ones.
    code = (
        "import numpy as np, selectjit\n"
        "x = np.ones(1 << 20, np.float32)\n"
        "a = selectjit.where(x > 0, x, 0)\n"
        "b = selectjit.Engine().where(x > 0, x, 0)\n"
        "print(selectjit.default_engine().output_pool_stats()['enabled'],"
        " selectjit.Engine().output_pool_stats()['enabled'],"
        " selectjit.Engine(output_pool=True).output_pool_stats()['cap_bytes'] > 0)\n"
    )
    env = dict(os.environ, SELECTJIT_OUTPUT_POOL="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "True"], out
    env["SELECTJIT_OUTPUT_POOL"] = "sometimes"
    r = subprocess.run([sys.executable, "-c", "import selectjit; selectjit.Engine()"], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "SELECTJIT_OUTPUT_POOL" in r.stderr, r.stderr
