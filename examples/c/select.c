/* The README's C example as a program: the ONNX Where example on a JIT engine, then the same
 * call with `then` reversed (x[::-1, ::-1]) through negative strides and an offset.
 *
 *   cargo build --release
 *   cc -std=c99 -Iinclude examples/c/select.c -Ltarget/release -lselectjit \
 *      -Wl,-rpath,target/release -o select && ./select
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "selectjit.h"

int main(void) {
    /* Fields left out are 0: their defaults (and the environment is not read). */
    SelectjitOptions opts = {.struct_size = sizeof(SelectjitOptions), .backend = SELECTJIT_BACKEND_JIT};
    SelectjitEngine *e = NULL;
    if (selectjit_engine_new(&opts, &e) != SELECTJIT_OK) {
        fprintf(stderr, "%s\n", selectjit_last_error());
        return 1;
    }
    uint8_t cond[4] = {1, 0, 1, 1};
    int64_t x[4] = {1, 2, 3, 4}, y[4] = {9, 8, 7, 6}, out[4] = {0};
    size_t s22[2] = {2, 2};
    /* data, bytes, shape, rank, strides (NULL: row-major), offset of the first element */
    SelectjitTensor c = {cond, 4, s22, 2, NULL, 0}, t = {(uint8_t *)x, 32, s22, 2, NULL, 0},
                    el = {(uint8_t *)y, 32, s22, 2, NULL, 0};
    SelectjitTensorMut o = {(uint8_t *)out, 32, s22, 2, NULL, 0};
    if (selectjit_select(e, SELECTJIT_DTYPE_I64, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o) != SELECTJIT_OK) {
        fprintf(stderr, "%s\n", selectjit_last_error());
        return 1;
    }
    printf("where:    %lld %lld %lld %lld\n", (long long)out[0], (long long)out[1], (long long)out[2],
           (long long)out[3]);

    /* then reversed in both dims: strides {-2, -1} from its last element (offset 3). */
    ptrdiff_t rev[2] = {-2, -1};
    SelectjitTensor trev = {(uint8_t *)x, 32, s22, 2, rev, 3};
    if (selectjit_select(e, SELECTJIT_DTYPE_I64, SELECTJIT_MODE_NUMPY, -1, &c, &trev, &el, &o) != SELECTJIT_OK) {
        fprintf(stderr, "%s\n", selectjit_last_error());
        return 1;
    }
    printf("reversed: %lld %lld %lld %lld\n", (long long)out[0], (long long)out[1], (long long)out[2],
           (long long)out[3]);
    int64_t want[4] = {4, 8, 2, 1};
    int ok = memcmp(out, want, sizeof want) == 0;

    /* A view that steps before its buffer is refused, and says why. */
    SelectjitTensor bad = {(uint8_t *)x, 32, s22, 2, rev, 2};
    int s = selectjit_select(e, SELECTJIT_DTYPE_I64, SELECTJIT_MODE_NUMPY, -1, &c, &bad, &el, &o);
    printf("bad view: %s: %s\n", selectjit_status_name(s), selectjit_last_error());
    ok &= s == SELECTJIT_ERR_LAYOUT;
    selectjit_engine_free(e);
    return ok ? 0 : 1;
}
