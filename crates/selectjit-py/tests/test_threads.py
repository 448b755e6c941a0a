"""Many Python threads on one shared engine: every result exact (the GIL is released while
kernels run, so the calls really overlap)."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import selectjit
from conftest import named_tier

SHAPES = [(1000,), (300, 7), (64, 64), (5, 1, 200), (10,)]
DTYPES = [np.float32, np.float16, np.int8, np.float64, np.complex128]


def job(seed, engine):
    rng = np.random.default_rng(seed)
    shape = SHAPES[seed % len(SHAPES)]
    dtype = DTYPES[(seed // len(SHAPES)) % len(DTYPES)]
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    x = rng.integers(0, 256, n, dtype=np.uint8).view(dtype).reshape(shape)
    y = rng.integers(0, 256, n, dtype=np.uint8).view(dtype).reshape(shape)[..., ::-1]
    c = rng.random(shape[-1:]) < 0.5
    w = (engine or selectjit).where
    for _ in range(20):
        got = w(c, x, y)
        want = np.where(c, x, y)
        if got.tobytes() != want.tobytes() or got.dtype != want.dtype:
            return f"seed {seed}: differs"
        out = np.empty_like(want)
        w(c, x, y, out=out)
        if out.tobytes() != want.tobytes():
            return f"seed {seed}: out= differs"
    return None


@pytest.mark.parametrize("which", ["default", "own-engine-2-threads", "named-tier"])
def test_threads_share_an_engine(which):
    if which == "named-tier" and named_tier() is None:
        pytest.skip("no named tier runs here")
    engine = {"default": lambda: None,
              "own-engine-2-threads": lambda: selectjit.Engine(threads=2),
              "named-tier": lambda: selectjit.Engine(tier=named_tier())}[which]()
    with ThreadPoolExecutor(max_workers=8) as pool:
        errors = [e for e in pool.map(lambda s: job(s, engine), range(64)) if e]
    assert errors == []


def test_gil_is_released_during_large_calls():
    """Another Python thread runs Python code while a large select is inside the kernel: it
    records times well inside the call (away from its ends, where the interpreter may switch
    threads around the call: a margin of 15% of the call's time and at least two switch
    intervals at each end, so that a faster kernel does not leave no window)."""
    import sys
    import time

    rng = np.random.default_rng(1)
    n = 1 << 24
    c = rng.random(n) < 0.5
    x = rng.random(n).astype(np.float32)
    y = np.float32(0)
    engine = selectjit.Engine(threads=1)
    engine.where(c, x, y)  # compile first
    done = threading.Event()
    ticks = []

    def spin():
        while not done.is_set():
            ticks.append(time.perf_counter())

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    t = threading.Thread(target=spin)
    t.start()
    inside = 0
    try:
        time.sleep(0.01)
        for _ in range(5):
            t0 = time.perf_counter()
            r = engine.where(c, x, y)
            t1 = time.perf_counter()
            margin = max(0.001, 0.15 * (t1 - t0))
            inside += sum(1 for k in list(ticks) if t0 + margin < k < t1 - margin)
    finally:
        done.set()
        t.join()
        sys.setswitchinterval(interval)
    assert r.tobytes() == np.where(c, x, y).tobytes()
    assert inside > 0


def test_in_place_from_many_threads_on_distinct_outputs():
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((200, 50)).astype(np.float32) for _ in range(16)]
    wants = [np.where(a > 0, a, np.float32(0)) for a in arrays]

    def work(i):
        selectjit.where(arrays[i] > 0, arrays[i], np.float32(0), out=arrays[i])

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(16)))
    assert all(a.tobytes() == w.tobytes() for a, w in zip(arrays, wants))
