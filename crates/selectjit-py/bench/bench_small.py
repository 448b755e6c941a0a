"""Per-call time (us, best of several repeats) of ReLU `where(x > 0, x, 0)` with selectjit
(lazy predicate, allocating and `out=`), numpy, numba @vectorize and JAX jit, in one run:
tiny_relu_f32_16 (16 float32) and relu_bf16_1m (2**20 bfloat16)."""

import timeit

import numpy as np

import selectjit


def best(f, n):
    return min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6


def cases():
    import ml_dtypes

    rng = np.random.default_rng(0)
    yield "tiny_relu_f32_16", rng.standard_normal(16).astype(np.float32), 20000
    yield "relu_bf16_1m", rng.standard_normal(1 << 20).astype(ml_dtypes.bfloat16), 20


def main():
    g, w = selectjit.greater, selectjit.where
    print(f"{'case':18} {'impl':22} {'us/call':>9}")
    for name, x, n in cases():
        o = np.empty_like(x)
        rows = {
            "selectjit": lambda: w(g(x, 0), x, 0),
            "selectjit out=": lambda: w(g(x, 0), x, 0, out=o),
            "numpy": lambda: np.where(x > 0, x, 0),
        }
        try:
            import numba

            if x.dtype == np.float32:  # (numba has no bfloat16)

                @numba.vectorize(["float32(float32)"])
                def relu(v):
                    return v if v > 0 else np.float32(0)

                rows["numba @vectorize"] = lambda: relu(x)
                rows["numba @vectorize out="] = lambda: relu(x, out=o)
        except ImportError:
            pass
        try:
            import jax
            import jax.numpy as jnp

            f = jax.jit(lambda v: jnp.where(v > 0, v, 0))
            xj = jnp.asarray(x)
            f(xj).block_until_ready()
            rows["jax jit"] = lambda: f(xj).block_until_ready()
        except ImportError:
            pass
        for impl, fn in rows.items():
            fn()
            print(f"{name:18} {impl:22} {best(fn, n):9.2f}")


if __name__ == "__main__":
    main()
