"""selectjit on a dask.distributed cluster of real worker processes (a LocalCluster: two
processes of one thread, memory limits set): a masked fill over many chunks with broadcasting
inputs, and a ReLU with a fused lazy predicate, bitwise against numpy on the gathered arrays; each worker's kernels compiled once and
reused by a second run of the graph; a worker killed mid-computation, whose tasks dask reruns
elsewhere, with an exact result; errors raised on the workers arrive on the client as the same
exception type, with nothing written to the caller's output."""

import logging
import os
import signal
import sys
import time

import cloudpickle
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream

import selectjit
import selectjit.dask as sjd

# The helpers below run on the workers, which cannot import this test module: send them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

MEMORY_LIMIT = 1 << 30
TIMEOUT = 60


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                      memory_limit=MEMORY_LIMIT, dashboard_address=None, scheduler_port=0,
                      silence_logs=logging.ERROR) as cluster, \
            Client(cluster, timeout="30s") as c:
        c.wait_for_workers(2, timeout=TIMEOUT)
        yield c


def engine_stats():
    """The worker process's default engine's counters (run there by `client.run`)."""
    return selectjit.default_engine().stats()


def random_bits(seed, shape, chunks, dtype):
    """A dask array of `dtype` holding random bytes (NaN payloads, -0.0, ...), generated on the
    workers."""
    rng = da.random.default_rng(seed)
    words = rng.integers(0, 1 << 32, shape, chunks=chunks, dtype=np.uint32)
    return words.view(dtype) if np.dtype(dtype).itemsize == 4 else words.astype(dtype)


def gather(client, *arrays):
    """The arrays computed on the cluster and gathered here."""
    return [f.result(timeout=TIMEOUT) for f in client.compute(list(arrays))]


def where_tasks(stream):
    """How many selectjit.dask.where blocks each worker ran, from a task stream."""
    counts = {}
    for t in stream.data:
        name = t["key"][0] if isinstance(t["key"], tuple) else t["key"]
        if str(name).startswith("selectjit-where"):
            counts[t["worker"]] = counts.get(t["worker"], 0) + 1
    return counts


def test_worker_processes_and_limits(client):
    info = client.scheduler_info()["workers"]
    pids = client.run(os.getpid)
    assert len(info) == 2 and len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    assert all(w["nthreads"] == 1 and w["memory_limit"] == MEMORY_LIMIT for w in info.values())


def test_masked_fill_through_the_client(client):
    scores = random_bits(1, (1024, 1000), (128, 250), np.float32)         # 8 x 4 blocks
    mask = da.random.default_rng(2).random((1, 1000), chunks=(1, 250)) < 0.8   # a row
    fill = random_bits(3, (1000,), 500, np.float32)             # a row of fills, other chunks
    col = da.random.default_rng(4).random((1024, 1), chunks=(128, 1)) < 0.5   # a column
    small = random_bits(5, (1024, 1000), (256, 500), np.int8)
    with get_task_stream(client) as stream:
        outs = [sjd.where(mask, scores, fill),
                sjd.where(col, small, 300),                   # int8 and a weak Python int
                sjd.where(col, scores, small),                # int8 cast to float32
                da.blockwise(selectjit.where, "ij", mask, "ij", scores, "ij", np.float32(0), None,
                             dtype=np.float32)]
        got = gather(client, *outs)
    s, m, f, c, i8 = gather(client, scores, mask, fill, col, small)
    wants = [np.where(m, s, f), np.where(c, i8, 300), np.where(c, s, i8), np.where(m, s, np.float32(0))]
    for g, w, o in zip(got, wants, outs):
        assert g.dtype == w.dtype == o.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()
    assert np.isnan(s).any()                                  # NaN payloads went through
    ran = where_tasks(stream)
    assert sum(ran.values()) == sum(o.npartitions for o in outs[:3])
    assert len(ran) == 2, ran                                 # both worker processes took part


def test_second_run_reuses_each_workers_kernels(client):
    """The same graph computed twice: the first run compiles each worker's kernels (a
    signature's exact kernel is compiled on its second sighting), the second, whose blocks are
    all recomputed (the task stream says so), compiles nothing on any worker."""
    x = random_bits(6, (2048, 512), (64, 512), np.float32)               # 32 equal blocks
    m = da.random.default_rng(7).random((1, 512), chunks=(1, 512)) < 0.5
    out = sjd.where(m, x, np.float32(-np.inf))
    before = client.run(engine_stats)
    with get_task_stream(client) as first:
        r1 = client.compute(out).result(timeout=TIMEOUT)
    mid = client.run(engine_stats)
    with get_task_stream(client) as second:
        r2 = client.compute(out).result(timeout=TIMEOUT)
    after = client.run(engine_stats)
    ran1, ran2 = where_tasks(first), where_tasks(second)
    # Every worker saw the blocks' signature at least twice in the first run.
    assert set(ran1) == set(before) and min(ran1.values()) >= 2, ran1
    assert sum(ran2.values()) == out.npartitions, ran2
    for w in before:
        assert mid[w]["compiles"] > before[w]["compiles"], (w, before[w], mid[w])
        for k in ["compiles", "generic_compiles", "trial_compiles", "compile_failures"]:
            assert after[w][k] == mid[w][k], (w, k, mid[w], after[w])
    want = np.where(*gather(client, m, x), np.float32(-np.inf))
    assert r1.tobytes() == r2.tobytes() == want.tobytes()


def test_fused_predicate_relu_on_the_cluster(client):
    """ReLU with a lazy predicate (`where(greater(x, 0), x, 0)`, fused per block) and its
    negation over 32 chunks each on both worker processes, bitwise against numpy."""
    x = random_bits(12, (512, 256), (64, 64), np.float32)                 # 8 x 4 blocks
    b = random_bits(13, (256,), 128, np.float16)
    with get_task_stream(client) as stream:
        outs = [sjd.where(selectjit.greater(x, 0), x, 0),
                sjd.where(selectjit.logical_not(selectjit.less_equal(x, b)), b, x)]
        got = gather(client, *outs)
    xn, bn = gather(client, x, b)
    wants = [np.where(np.greater(xn, 0), xn, 0),
             np.where(np.logical_not(np.less_equal(xn, bn)), bn, xn)]
    for g, w in zip(got, wants):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()
    assert np.isnan(xn).any()                                 # NaN payloads went through
    ran = where_tasks(stream)
    assert sum(ran.values()) == sum(o.npartitions for o in outs) == 64
    assert len(ran) == 2, ran


def where_into(path, shape, dtype, rows, cond, x, y):
    """On a worker: selectjit.where into rows of the caller's output, a file both see."""
    out = np.memmap(path, dtype=dtype, mode="r+", shape=shape)
    selectjit.where(cond, x, y, out=out[rows])
    out.flush()
    return rows.start


def test_errors_arrive_as_the_same_type_and_write_nothing(client, tmp_path):
    shape, dtype = (64, 32), np.float32
    path = str(tmp_path / "out.f32")
    pattern = np.frombuffer(np.random.default_rng(8).bytes(64 * 32 * 4), np.uint8)
    pattern.tofile(path)
    rng = np.random.default_rng(9)
    x = rng.standard_normal(shape).astype(dtype)
    c = rng.random((1, 32)) < 0.5
    rows = [slice(r, r + 16) for r in range(0, 64, 16)]
    good = [(c, x[r], np.float32(0)) for r in rows]
    bad = {
        "x float64 into a float32 output": [(c, x[r].astype(np.float64), 0.0) for r in rows],
        "x and y do not promote": [(c, x[r], np.zeros(32, "M8[s]")) for r in rows],
        "x has more rows than its output": [(c, x[r.start:r.stop + 1], 0.0) for r in rows[:3]],
        "condition does not broadcast": [(c[:, :31], x[r], np.float32(0)) for r in rows],
    }
    scratch = str(tmp_path / "scratch.f32")
    for what, calls in bad.items():
        np.zeros(shape, dtype).tofile(scratch)
        with pytest.raises(Exception) as local:                        # the same call, here
            where_into(scratch, shape, dtype, rows[0], *calls[0])
        assert isinstance(local.value, (TypeError, ValueError)), (what, local.value)
        futures = client.map(where_into, [path] * len(calls), [shape] * len(calls),
                             [dtype] * len(calls), rows[:len(calls)],
                             *zip(*calls), pure=False)
        with pytest.raises(Exception) as remote:
            client.gather(futures)
        assert type(remote.value) is type(local.value), (what, remote.value, local.value)
        assert np.fromfile(path, np.uint8).tobytes() == pattern.tobytes(), what

    # Good blocks beside one bad one: the good ones are written, the bad one's rows are not.
    calls = good[:3] + [bad["x float64 into a float32 output"][3]]
    futures = client.map(where_into, [path] * 4, [shape] * 4, [dtype] * 4, rows, *zip(*calls),
                         pure=False)
    with pytest.raises(TypeError):
        client.gather(futures)
    for f in futures[:3]:
        f.result(timeout=TIMEOUT)
    got = np.fromfile(path, np.uint8).reshape(64, 32 * 4)
    want = np.where(c, x, np.float32(0)).view(np.uint8)
    assert got[:48].tobytes() == want[:48].tobytes()
    assert got[48:].tobytes() == pattern.reshape(64, 128)[48:].tobytes()


def pause(block):
    """Slows a block down (0.03 s) so that a worker can be killed while it computes."""
    time.sleep(0.03)
    return block


def test_killed_worker_is_retried(client):
    """SIGKILL one worker process while it holds finished blocks and computes another: dask
    reruns its tasks on the other worker (and the nanny restarts it); the result is exact."""
    x = random_bits(10, (4096, 256), (64, 256), np.float32)              # 64 blocks, ~2 s
    m = da.random.default_rng(11).random((1, 256), chunks=(1, 256)) < 0.5
    out = sjd.where(m, x.map_blocks(pause, dtype=x.dtype), np.float32(0))
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    future = client.compute(out)
    deadline = time.monotonic() + TIMEOUT
    while not (client.has_what([victim])[victim] and client.processing([victim])[victim]):
        assert time.monotonic() < deadline and not future.done(), "no work reached the victim"
        time.sleep(0.01)
    assert not future.done()
    os.kill(pids[victim], signal.SIGKILL)
    got = future.result(timeout=TIMEOUT)
    client.wait_for_workers(2, timeout=TIMEOUT)                         # the nanny's new worker
    assert pids[victim] not in client.run(os.getpid).values()
    want = np.where(*gather(client, m, x), np.float32(0))
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
