/* Exercises the C ABI: values, broadcasting, every backend, strides, in place, prepared calls,
 * statistics and the error paths. Counts its checks; exits 1 on any failure. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "selectjit.h"
/* The kernel table of an object exported for this host by tests/c_api.rs (selectjit aot):
 * i64 [2,2] calls (exact and generic kernels) and the generic kernel of f32 "row cond, matrix
 * then, scalar else" calls. */
#include "kernels.h"

static int checks = 0, failures = 0;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        checks++;                                                            \
        if (!(cond)) {                                                       \
            failures++;                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, " (last error: %s)\n", selectjit_last_error());  \
        }                                                                    \
    } while (0)

static SelectjitTensor tensor_at(const void *data, size_t len, const size_t *shape, size_t rank,
                                 const ptrdiff_t *strides, size_t offset) {
    SelectjitTensor t = {(const uint8_t *)data, len, shape, rank, strides, offset};
    return t;
}

static SelectjitTensor tensor(const void *data, size_t len, const size_t *shape, size_t rank,
                              const ptrdiff_t *strides) {
    return tensor_at(data, len, shape, rank, strides, 0);
}

static void onnx_example(int backend) {
    SelectjitEngine *e = selectjit_engine_new(backend, 0, 1);
    CHECK(e != NULL, "engine %d", backend);
    size_t s22[2] = {2, 2};
    uint8_t cond[4] = {1, 0, 1, 1};
    int64_t x[4] = {1, 2, 3, 4}, y[4] = {9, 8, 7, 6}, out[4] = {0};
    SelectjitTensor c = tensor(cond, 4, s22, 2, NULL), t = tensor(x, 32, s22, 2, NULL),
                    el = tensor(y, 32, s22, 2, NULL), o = tensor(out, 32, s22, 2, NULL);
    int st = selectjit_select(e, SELECTJIT_DTYPE_I64, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o);
    CHECK(st == SELECTJIT_OK, "onnx status %d", st);
    int64_t want[4] = {1, 8, 3, 4};
    CHECK(memcmp(out, want, sizeof want) == 0, "onnx values (backend %d)", backend);
    selectjit_engine_free(e);
}

static void broadcast_strided_inplace(void) {
    SelectjitEngine *e = selectjit_engine_new(SELECTJIT_BACKEND_JIT, 16, 1);
    /* cond [3] (bytes other than 0/1), then [2,3] f32 transposed (column-major), else scalar. */
    size_t s3[1] = {3}, s23[2] = {2, 3};
    uint8_t cond[3] = {0x80, 0, 2};
    float tcol[6] = {1, 4, 2, 5, 3, 6}; /* [[1,2,3],[4,5,6]] column-major */
    ptrdiff_t tst[2] = {1, 2};
    float minus = -0.0f, out[6];
    SelectjitTensor c = tensor(cond, 3, s3, 1, NULL), t = tensor(tcol, sizeof tcol, s23, 2, tst),
                    el = tensor(&minus, 4, NULL, 0, NULL), o = tensor(out, sizeof out, s23, 2, NULL);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o) == 0, "broadcast");
    float want[6] = {1, -0.0f, 3, 4, -0.0f, 6};
    CHECK(memcmp(out, want, sizeof want) == 0, "broadcast values (bit for bit, -0.0 kept)");

    /* In place: the output is exactly the then tensor. */
    float io[6] = {1, 2, 3, 4, 5, 6};
    SelectjitTensor iot = tensor(io, sizeof io, s23, 2, NULL);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &iot, &el, &iot) == 0, "in place");
    float want2[6] = {1, -0.0f, 3, 4, -0.0f, 6};
    CHECK(memcmp(io, want2, sizeof want2) == 0, "in-place values");

    /* Output shape query, pdpd with axis 1. */
    size_t sc[1] = {3}, stt[3] = {2, 3, 4}, se[2] = {3, 4}, os[8], orank = 0;
    CHECK(selectjit_output_shape(SELECTJIT_MODE_PDPD, 1, sc, 1, stt, 3, se, 2, os, 8, &orank) == 0, "shape");
    CHECK(orank == 3 && os[0] == 2 && os[1] == 3 && os[2] == 4, "pdpd shape");
    CHECK(selectjit_output_shape(SELECTJIT_MODE_PDPD, -1, sc, 1, stt, 3, se, 2, os, 8, &orank) ==
              SELECTJIT_ERR_BROADCAST, "pdpd axis -1 error");
    selectjit_engine_free(e);
}

static void prepared_and_stats(void) {
    SelectjitEngine *e = selectjit_engine_new(SELECTJIT_BACKEND_JIT, 8, 1);
    size_t sc[4] = {1, 1, 4, 4}, st[4] = {2, 3, 4, 4};
    SelectjitPrepared *p = selectjit_prepare(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, sc, 4, st, 4, NULL, 0);
    CHECK(p != NULL, "prepare");
    uint8_t cond[16];
    uint16_t t[96], big = 0xffff, out[96];
    for (int i = 0; i < 16; i++) cond[i] = (uint8_t)((i % 4) <= (i / 4)); /* causal */
    for (int i = 0; i < 96; i++) t[i] = (uint16_t)i;
    for (int round = 0; round < 3; round++) {
        memset(out, 0, sizeof out);
        int s = selectjit_prepared_run(p, cond, 16, (uint8_t *)t, sizeof t, (uint8_t *)&big, 2, (uint8_t *)out, sizeof out);
        CHECK(s == 0, "prepared run %d", round);
        int ok = 1;
        for (int i = 0; i < 96; i++) ok &= out[i] == (cond[i % 16] ? t[i] : 0xffff);
        CHECK(ok, "prepared values round %d", round);
    }
    CHECK(selectjit_prepared_run(p, cond, 15, (uint8_t *)t, sizeof t, (uint8_t *)&big, 2, (uint8_t *)out, sizeof out) ==
              SELECTJIT_ERR_LAYOUT, "short cond");
    SelectjitStats stats;
    CHECK(selectjit_engine_stats(e, &stats) == 0, "stats");
    CHECK(stats.compiles >= 1 && stats.capacity == 8, "stats values compiles=%llu capacity=%llu",
          (unsigned long long)stats.compiles, (unsigned long long)stats.capacity);
    selectjit_prepared_free(p);
    selectjit_engine_free(e);
}

static void errors(void) {
    SelectjitEngine *e = selectjit_engine_new(SELECTJIT_BACKEND_JIT, 0, 0);
    size_t s2[1] = {2}, s3[1] = {3};
    uint8_t cond[2] = {1, 0};
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, out[3];
    SelectjitTensor c = tensor(cond, 2, s2, 1, NULL), t3 = tensor(a, 12, s3, 1, NULL),
                    e3 = tensor(b, 12, s3, 1, NULL), o2 = tensor(out, 8, s2, 1, NULL);
    int s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &t3, &e3, &o2);
    CHECK(s == SELECTJIT_ERR_BROADCAST, "bad shapes -> %s", selectjit_status_name(s));
    CHECK(strstr(selectjit_last_error(), "[2]") && strstr(selectjit_last_error(), "[3]"), "message names shapes");

    SelectjitTensor tshort = tensor(a, 4, s2, 1, NULL), e2 = tensor(b, 8, s2, 1, NULL);
    s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &tshort, &e2, &o2);
    CHECK(s == SELECTJIT_ERR_LAYOUT, "short buffer -> %s", selectjit_status_name(s));
    CHECK(strlen(selectjit_last_error()) > 0, "message");

    SelectjitTensor t2 = tensor(a, 8, s2, 1, NULL), tnull = tensor(NULL, 8, s2, 1, NULL);
    s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &tnull, &e2, &o2);
    CHECK(s == SELECTJIT_ERR_NULL_POINTER, "null data -> %s", selectjit_status_name(s));
    s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, NULL, &e2, &o2);
    CHECK(s == SELECTJIT_ERR_NULL_POINTER, "null tensor -> %s", selectjit_status_name(s));
    s = selectjit_select(NULL, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &t2, &e2, &o2);
    CHECK(s == SELECTJIT_ERR_NULL_POINTER, "null engine -> %s", selectjit_status_name(s));

    /* Output overlapping an input without being exactly it. */
    SelectjitTensor oshift = tensor((uint8_t *)a + 4, 8, s2, 1, NULL);
    s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &t2, &e2, &oshift);
    CHECK(s == SELECTJIT_ERR_OVERLAP, "overlap -> %s", selectjit_status_name(s));

    s = selectjit_select(e, 99, SELECTJIT_MODE_NUMPY, -1, &c, &t2, &e2, &o2);
    CHECK(s == SELECTJIT_ERR_DTYPE, "bad dtype -> %s", selectjit_status_name(s));
    s = selectjit_select(e, SELECTJIT_DTYPE_F32, 7, -1, &c, &t2, &e2, &o2);
    CHECK(s == SELECTJIT_ERR_INVALID, "bad mode -> %s", selectjit_status_name(s));
    size_t big[65];
    for (int i = 0; i < 65; i++) big[i] = 1;
    SelectjitTensor trank = tensor(a, 4, big, 65, NULL);
    s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &trank, &e2, &o2);
    CHECK(s == SELECTJIT_ERR_INVALID, "rank 65 -> %s", selectjit_status_name(s));
    CHECK(selectjit_engine_new(7, 0, 0) == NULL, "bad backend");
    s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &t2, &e2, &o2);
    CHECK(s == SELECTJIT_OK && strlen(selectjit_last_error()) == 0, "success clears the error");
    selectjit_engine_free(e);
    selectjit_engine_free(NULL);
}

static SelectjitStats stats_of(SelectjitEngine *e) {
    SelectjitStats s;
    memset(&s, 0, sizeof s);
    CHECK(selectjit_engine_stats(e, &s) == SELECTJIT_OK, "stats");
    return s;
}

/* An engine with only the AOT table (static backend: no code generation): exact kernel, generic
 * kernel with other dims, static kernels for a width the table lacks; then rejected tables. */
static void aot_table(void) {
    CHECK(selectjit_aot_table_check(&selectjit_aot_table) == SELECTJIT_OK, "host table accepted");
    int st = -1;
    SelectjitEngine *e = selectjit_engine_new_aot(&selectjit_aot_table, SELECTJIT_BACKEND_STATIC, 0, 1, &st);
    CHECK(e != NULL && st == SELECTJIT_OK, "aot engine, status %d", st);
    SelectjitStats s = stats_of(e);
    CHECK(s.aot_kernels == 3 && s.aot_rejected == 0, "aot kernels %llu", (unsigned long long)s.aot_kernels);

    /* Exact: the ONNX example. */
    size_t s22[2] = {2, 2};
    uint8_t cond[4] = {1, 0, 0x80, 1};
    int64_t x[4] = {1, 2, 3, 4}, y[4] = {9, 8, 7, 6}, out[4] = {0};
    SelectjitTensor c = tensor(cond, 4, s22, 2, NULL), t = tensor(x, 32, s22, 2, NULL),
                    el = tensor(y, 32, s22, 2, NULL), o = tensor(out, 32, s22, 2, NULL);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_I64, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o) == 0, "aot exact");
    int64_t want[4] = {1, 8, 3, 4};
    CHECK(memcmp(out, want, sizeof want) == 0, "aot exact values");
    s = stats_of(e);
    CHECK(s.aot_exact_runs == 1 && s.aot_generic_runs == 0 && s.static_runs == 0, "exact run counted");

    /* Generic: cond [5], then [4,5], else scalar; the table's kernel came from [2,3]. */
    size_t s5[1] = {5}, s45[2] = {4, 5};
    uint8_t c5[5] = {0, 1, 0, 2, 0};
    float m[20], minus = -1.0f, fo[20];
    for (int i = 0; i < 20; i++) m[i] = (float)i;
    SelectjitTensor gc = tensor(c5, 5, s5, 1, NULL), gt = tensor(m, sizeof m, s45, 2, NULL),
                    ge = tensor(&minus, 4, NULL, 0, NULL), go = tensor(fo, sizeof fo, s45, 2, NULL);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &gc, &gt, &ge, &go) == 0, "aot generic");
    int ok = 1;
    for (int i = 0; i < 20; i++) ok &= fo[i] == (c5[i % 5] ? m[i] : -1.0f);
    CHECK(ok, "aot generic values");
    s = stats_of(e);
    CHECK(s.aot_generic_runs == 1 && s.static_runs == 0, "generic run counted");

    /* A width the table lacks: the static kernels. */
    uint16_t hx[4] = {1, 2, 3, 4}, hy[4] = {9, 8, 7, 6}, ho[4];
    SelectjitTensor ht = tensor(hx, 8, s22, 2, NULL), he = tensor(hy, 8, s22, 2, NULL), hout = tensor(ho, 8, s22, 2, NULL);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, &c, &ht, &he, &hout) == 0, "static");
    CHECK(ho[0] == 1 && ho[1] == 8 && ho[2] == 3 && ho[3] == 4, "static values");
    s = stats_of(e);
    CHECK(s.static_runs == 1 && s.aot_exact_runs == 1, "static run counted");
    selectjit_engine_free(e);

    /* Rejected tables: a clear error, and an engine that serves without them. */
    SelectjitAotTable bad = selectjit_aot_table;
    bad.version = 99;
    CHECK(selectjit_aot_table_check(&bad) == SELECTJIT_ERR_AOT, "wrong version rejected");
    CHECK(strstr(selectjit_last_error(), "version 99") != NULL, "version message: %s", selectjit_last_error());
    bad = selectjit_aot_table;
    memset(bad.triple, 0, sizeof bad.triple);
    strcpy(bad.triple, "s390x-unknown-linux-gnu");
    CHECK(selectjit_aot_table_check(&bad) == SELECTJIT_ERR_AOT, "wrong architecture rejected");
    CHECK(strstr(selectjit_last_error(), "s390x") != NULL, "architecture message");
    bad = selectjit_aot_table;
    bad.checksum ^= 1;
    CHECK(selectjit_aot_table_check(&bad) == SELECTJIT_ERR_AOT, "corrupted table rejected");
    CHECK(strstr(selectjit_last_error(), "checksum") != NULL, "checksum message");
    CHECK(selectjit_aot_table_check(NULL) == SELECTJIT_ERR_AOT, "NULL table rejected");
    CHECK(strcmp(selectjit_status_name(SELECTJIT_ERR_AOT), "kernel table rejected") == 0, "status name");

    st = -1;
    e = selectjit_engine_new_aot(&bad, SELECTJIT_BACKEND_STATIC, 0, 1, &st);
    CHECK(e != NULL && st == SELECTJIT_ERR_AOT, "engine despite a rejected table, status %d", st);
    CHECK(strstr(selectjit_last_error(), "checksum") != NULL, "engine reports why");
    memset(out, 0, sizeof out);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_I64, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o) == 0, "served anyway");
    CHECK(memcmp(out, want, sizeof want) == 0, "served values");
    s = stats_of(e);
    CHECK(s.aot_rejected == 1 && s.aot_kernels == 0 && s.static_runs == 1 && s.aot_exact_runs == 0,
          "rejection recorded");
    selectjit_engine_free(e);
    CHECK(selectjit_engine_new_aot(&selectjit_aot_table, 9, 0, 0, &st) == NULL && st == SELECTJIT_ERR_INVALID,
          "bad backend");
}

/* two-step: cond goes into the then/else result one way; it may not grow a dim of 1 nor add
 * one. Each of these is an error on every backend, and the output is left untouched. */
static void two_step_one_way(int backend) {
    SelectjitEngine *e = selectjit_engine_new(backend, 0, 1);
    static const size_t c0[1] = {17}, t0[1] = {1};
    static const size_t c1[3] = {17, 1, 3}, t1[3] = {1, 1, 1};
    static const size_t c2[3] = {0, 16, 1}, t2[3] = {1, 1, 1};
    static const size_t c3[2] = {2, 1}, t3[2] = {1, 3}, e3[1] = {3};
    static const size_t o0[1] = {17}, o1[3] = {17, 1, 3}, o2[3] = {0, 16, 1}, o3[2] = {2, 3};
    struct { const size_t *c, *t, *e, *o; size_t rc, rt, re, ro; } rows[4] = {
        {c0, t0, NULL, o0, 1, 1, 0, 1},
        {c1, t1, NULL, o1, 3, 3, 0, 3},
        {c2, t2, t2, o2, 3, 3, 3, 3},
        {c3, t3, e3, o3, 2, 2, 1, 2},
    };
    uint8_t cond[64];
    float a[64], b[64], out[64];
    memset(cond, 1, sizeof cond);
    for (int i = 0; i < 64; i++) a[i] = (float)i, b[i] = -1.0f, out[i] = 42.0f;
    for (int k = 0; k < 4; k++) {
        SelectjitTensor c = tensor(cond, sizeof cond, rows[k].c, rows[k].rc, NULL),
                        t = tensor(a, sizeof a, rows[k].t, rows[k].rt, NULL),
                        el = tensor(b, sizeof b, rows[k].e, rows[k].re, NULL),
                        o = tensor(out, sizeof out, rows[k].o, rows[k].ro, NULL);
        int s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_TWO_STEP, -1, &c, &t, &el, &o);
        CHECK(s == SELECTJIT_ERR_BROADCAST, "two-step row %d (backend %d) -> %s", k, backend,
              selectjit_status_name(s));
        CHECK(strstr(selectjit_last_error(), "two-step") != NULL, "two-step message row %d", k);
        int untouched = 1;
        for (int i = 0; i < 64; i++) untouched &= out[i] == 42.0f;
        CHECK(untouched, "two-step row %d: output untouched", k);
        /* The same shapes are fine under numpy broadcasting. */
        s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o);
        CHECK(s == SELECTJIT_OK, "numpy row %d (backend %d) -> %s", k, backend, selectjit_status_name(s));
        for (int i = 0; i < 64; i++) out[i] = 42.0f;
    }
    selectjit_engine_free(e);
}

/* Negative strides: `offset` is the element index of coordinate [0, 0, ...] in the buffer. */
static void negative_strides(int backend) {
    SelectjitEngine *e = selectjit_engine_new(backend, 0, 1);
    size_t s23[2] = {2, 3};
    uint8_t cond[6] = {1, 0, 1, 0, 0x80, 1};
    int32_t t[6] = {1, 2, 3, 4, 5, 6}, el[6] = {-1, -2, -3, -4, -5, -6}, out[6];
    ptrdiff_t rev[2] = {-3, -1}, rows[2] = {-3, 1}, cols[2] = {3, -1};
    /* then = t[::-1, ::-1], else rows reversed, out columns reversed. */
    SelectjitTensor c = tensor(cond, 6, s23, 2, NULL), tt = tensor_at(t, sizeof t, s23, 2, rev, 5),
                    ee = tensor_at(el, sizeof el, s23, 2, rows, 3),
                    o = tensor_at(out, sizeof out, s23, 2, cols, 2);
    int s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &c, &tt, &ee, &o);
    CHECK(s == SELECTJIT_OK, "negative strides (backend %d) -> %s", backend, selectjit_status_name(s));
    /* Logical then [[6,5,4],[3,2,1]], else [[-4,-5,-6],[-1,-2,-3]]; result
     * [[6,-5,4],[-1,2,1]], stored with each row reversed. */
    int32_t want[6] = {4, -5, 6, 1, 2, -1};
    CHECK(memcmp(out, want, sizeof want) == 0, "negative-stride values (backend %d)", backend);

    /* In place on a reversed view: out is exactly then (same strides and offset). */
    int32_t io[6] = {1, 2, 3, 4, 5, 6};
    SelectjitTensor iot = tensor_at(io, sizeof io, s23, 2, rev, 5);
    s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &c, &iot, &ee, &iot);
    CHECK(s == SELECTJIT_OK, "reversed in place -> %s", selectjit_status_name(s));
    int32_t want_io[6] = {1, 2, -1, 4, -5, 6};
    CHECK(memcmp(io, want_io, sizeof want_io) == 0, "reversed in-place values (backend %d)", backend);
    /* Another layout of the same buffer is not exactly then: an overlap. */
    SelectjitTensor iot4 = tensor_at(io, sizeof io, s23, 2, rows, 3);
    s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &c, &iot, &ee, &iot4);
    CHECK(s == SELECTJIT_ERR_OVERLAP, "shifted in place -> %s", selectjit_status_name(s));

    /* Stepping before the buffer: a layout error naming the operand and the dimension. */
    for (int i = 0; i < 6; i++) out[i] = 42;
    SelectjitTensor bad = tensor_at(t, sizeof t, s23, 2, cols, 1);
    s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &c, &bad, &ee, &o);
    CHECK(s == SELECTJIT_ERR_LAYOUT, "out of buffer -> %s", selectjit_status_name(s));
    CHECK(strstr(selectjit_last_error(), "then") && strstr(selectjit_last_error(), "dim 1"),
          "message names then and dim 1");
    int untouched = 1;
    for (int i = 0; i < 6; i++) untouched &= out[i] == 42;
    CHECK(untouched, "output untouched on a layout error");
    /* A zero-size reversed view addresses nothing. */
    size_t s03[2] = {0, 3};
    SelectjitTensor zc = tensor_at(cond, 0, s03, 2, rev, 7), zt = tensor_at(t, 0, s03, 2, rev, 0),
                    ze = tensor_at(el, 0, s03, 2, rows, 3), zo = tensor_at(out, 0, s03, 2, rev, 9);
    s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &zc, &zt, &ze, &zo);
    CHECK(s == SELECTJIT_OK, "zero-size reversed -> %s", selectjit_status_name(s));
    selectjit_engine_free(e);
}

int main(void) {
    onnx_example(SELECTJIT_BACKEND_JIT);
    onnx_example(SELECTJIT_BACKEND_STATIC);
    onnx_example(SELECTJIT_BACKEND_INTERP);
    broadcast_strided_inplace();
    prepared_and_stats();
    errors();
    two_step_one_way(SELECTJIT_BACKEND_JIT);
    two_step_one_way(SELECTJIT_BACKEND_STATIC);
    two_step_one_way(SELECTJIT_BACKEND_INTERP);
    negative_strides(SELECTJIT_BACKEND_JIT);
    negative_strides(SELECTJIT_BACKEND_STATIC);
    negative_strides(SELECTJIT_BACKEND_INTERP);
    aot_table();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
