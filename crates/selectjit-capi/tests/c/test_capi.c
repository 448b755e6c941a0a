/* Exercises the C ABI: values, broadcasting, every backend, strides, in place, prepared calls,
 * statistics, options (an older header's struct too), predicates (prepared ones too), and the
 * error paths (each leaving the output untouched). Counts its checks; exits 1 on any failure. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
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

static SelectjitTensorMut out_at(void *data, size_t len, const size_t *shape, size_t rank,
                                 const ptrdiff_t *strides, size_t offset) {
    SelectjitTensorMut t = {(uint8_t *)data, len, shape, rank, strides, offset};
    return t;
}

static SelectjitTensorMut out_tensor(void *data, size_t len, const size_t *shape, size_t rank,
                                     const ptrdiff_t *strides) {
    return out_at(data, len, shape, rank, strides, 0);
}

/* The same buffer as an input (for in place: then or else exactly the output). */
static SelectjitTensor input_of(SelectjitTensorMut m) {
    return tensor_at(m.data, m.len_bytes, m.shape, m.rank, m.strides, m.offset);
}

/* An engine with a backend, a cache capacity and threads (0: defaults), no environment. */
static SelectjitEngine *engine(int backend, size_t capacity, size_t threads) {
    SelectjitOptions o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.cache_capacity = capacity;
    o.threads = threads;
    SelectjitEngine *e = NULL;
    int st = selectjit_engine_new(&o, &e);
    CHECK(st == SELECTJIT_OK && e != NULL, "engine backend %d -> %s", backend, selectjit_status_name(st));
    return e;
}

static SelectjitStats stats_of(SelectjitEngine *e) {
    SelectjitStats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK(selectjit_engine_stats(e, &s) == SELECTJIT_OK, "stats");
    return s;
}

static void onnx_example(int backend) {
    SelectjitEngine *e = engine(backend, 0, 1);
    CHECK(e != NULL, "engine %d", backend);
    size_t s22[2] = {2, 2};
    uint8_t cond[4] = {1, 0, 1, 1};
    int64_t x[4] = {1, 2, 3, 4}, y[4] = {9, 8, 7, 6}, out[4] = {0};
    SelectjitTensor c = tensor(cond, 4, s22, 2, NULL), t = tensor(x, 32, s22, 2, NULL),
                    el = tensor(y, 32, s22, 2, NULL);
    SelectjitTensorMut o = out_tensor(out, 32, s22, 2, NULL);
    int st = selectjit_select(e, SELECTJIT_DTYPE_I64, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o);
    CHECK(st == SELECTJIT_OK, "onnx status %d", st);
    int64_t want[4] = {1, 8, 3, 4};
    CHECK(memcmp(out, want, sizeof want) == 0, "onnx values (backend %d)", backend);
    selectjit_engine_free(e);
}

static void broadcast_strided_inplace(void) {
    SelectjitEngine *e = engine(SELECTJIT_BACKEND_JIT, 16, 1);
    /* cond [3] (bytes other than 0/1), then [2,3] f32 transposed (column-major), else scalar. */
    size_t s3[1] = {3}, s23[2] = {2, 3};
    uint8_t cond[3] = {0x80, 0, 2};
    float tcol[6] = {1, 4, 2, 5, 3, 6}; /* [[1,2,3],[4,5,6]] column-major */
    ptrdiff_t tst[2] = {1, 2};
    float minus = -0.0f, out[6];
    SelectjitTensor c = tensor(cond, 3, s3, 1, NULL), t = tensor(tcol, sizeof tcol, s23, 2, tst),
                    el = tensor(&minus, 4, NULL, 0, NULL);
    SelectjitTensorMut o = out_tensor(out, sizeof out, s23, 2, NULL);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o) == 0, "broadcast");
    float want[6] = {1, -0.0f, 3, 4, -0.0f, 6};
    CHECK(memcmp(out, want, sizeof want) == 0, "broadcast values (bit for bit, -0.0 kept)");

    /* In place: the output is exactly the then tensor. */
    float io[6] = {1, 2, 3, 4, 5, 6};
    SelectjitTensorMut iot = out_tensor(io, sizeof io, s23, 2, NULL);
    SelectjitTensor iot_in = input_of(iot);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &iot_in, &el, &iot) == 0, "in place");
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
    SelectjitEngine *e = engine(SELECTJIT_BACKEND_JIT, 8, 1);
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
    SelectjitStats stats = stats_of(e);
    CHECK(stats.compiles >= 1 && stats.capacity == 8, "stats values compiles=%llu capacity=%llu",
          (unsigned long long)stats.compiles, (unsigned long long)stats.capacity);
    selectjit_prepared_free(p);
    selectjit_engine_free(e);
}

static void errors(void) {
    SelectjitEngine *e = engine(SELECTJIT_BACKEND_JIT, 0, 0);
    size_t s2[1] = {2}, s3[1] = {3};
    uint8_t cond[2] = {1, 0};
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, out[3];
    SelectjitTensor c = tensor(cond, 2, s2, 1, NULL), t3 = tensor(a, 12, s3, 1, NULL),
                    e3 = tensor(b, 12, s3, 1, NULL);
    SelectjitTensorMut o2 = out_tensor(out, 8, s2, 1, NULL);
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
    SelectjitTensorMut oshift = out_tensor((uint8_t *)a + 4, 8, s2, 1, NULL);
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
    s = selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &t2, &e2, &o2);
    CHECK(s == SELECTJIT_OK && strlen(selectjit_last_error()) == 0, "success clears the error");
    selectjit_engine_free(e);
    selectjit_engine_free(NULL);
}

/* An engine with only the AOT table (static backend: no code generation): exact kernel, generic
 * kernel with other dims, static kernels for a width the table lacks; then rejected tables. */
static void aot_table(void) {
    CHECK(selectjit_aot_table_check(&selectjit_aot_table) == SELECTJIT_OK, "host table accepted");
    SelectjitOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = SELECTJIT_BACKEND_STATIC;
    opt.threads = 1;
    opt.aot_table = &selectjit_aot_table;
    SelectjitEngine *e = NULL;
    int st = selectjit_engine_new(&opt, &e);
    CHECK(e != NULL && st == SELECTJIT_OK, "aot engine, status %d", st);
    CHECK(selectjit_engine_aot_status(e) == SELECTJIT_OK, "table in use");
    SelectjitStats s = stats_of(e);
    CHECK(s.aot_exact_kernels == 1 && s.aot_generic_kernels == 2, "aot kernels %llu + %llu",
          (unsigned long long)s.aot_exact_kernels, (unsigned long long)s.aot_generic_kernels);

    /* Exact: the ONNX example. */
    size_t s22[2] = {2, 2};
    uint8_t cond[4] = {1, 0, 0x80, 1};
    int64_t x[4] = {1, 2, 3, 4}, y[4] = {9, 8, 7, 6}, out[4] = {0};
    SelectjitTensor c = tensor(cond, 4, s22, 2, NULL), t = tensor(x, 32, s22, 2, NULL),
                    el = tensor(y, 32, s22, 2, NULL);
    SelectjitTensorMut o = out_tensor(out, 32, s22, 2, NULL);
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
                    ge = tensor(&minus, 4, NULL, 0, NULL);
    SelectjitTensorMut go = out_tensor(fo, sizeof fo, s45, 2, NULL);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &gc, &gt, &ge, &go) == 0, "aot generic");
    int ok = 1;
    for (int i = 0; i < 20; i++) ok &= fo[i] == (c5[i % 5] ? m[i] : -1.0f);
    CHECK(ok, "aot generic values");
    s = stats_of(e);
    CHECK(s.aot_generic_runs == 1 && s.static_runs == 0, "generic run counted");

    /* A width the table lacks: the static kernels. */
    uint16_t hx[4] = {1, 2, 3, 4}, hy[4] = {9, 8, 7, 6}, ho[4];
    SelectjitTensor ht = tensor(hx, 8, s22, 2, NULL), he = tensor(hy, 8, s22, 2, NULL);
    SelectjitTensorMut hout = out_tensor(ho, 8, s22, 2, NULL);
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

    /* Without aot_fallback a rejected table fails the constructor, which writes nothing. */
    opt.aot_table = &bad;
    e = (SelectjitEngine *)&opt; /* a sentinel: must stay */
    st = selectjit_engine_new(&opt, &e);
    CHECK(st == SELECTJIT_ERR_AOT && e == (SelectjitEngine *)&opt, "rejected table fails, status %d", st);
    CHECK(strstr(selectjit_last_error(), "checksum") != NULL, "constructor says why");
    /* With it, an engine that serves without the table and says why when asked. */
    opt.aot_fallback = 1;
    e = NULL;
    st = selectjit_engine_new(&opt, &e);
    CHECK(e != NULL && st == SELECTJIT_OK, "engine despite a rejected table, status %d", st);
    CHECK(selectjit_engine_aot_status(e) == SELECTJIT_ERR_AOT, "aot status: rejected");
    CHECK(strstr(selectjit_last_error(), "checksum") != NULL, "engine reports why");
    CHECK(selectjit_engine_aot_status(NULL) == SELECTJIT_ERR_NULL_POINTER, "aot status of NULL");
    memset(out, 0, sizeof out);
    CHECK(selectjit_select(e, SELECTJIT_DTYPE_I64, SELECTJIT_MODE_NUMPY, -1, &c, &t, &el, &o) == 0, "served anyway");
    CHECK(memcmp(out, want, sizeof want) == 0, "served values");
    s = stats_of(e);
    CHECK(s.aot_exact_kernels == 0 && s.static_runs == 1 && s.aot_exact_runs == 0, "no table used");
    selectjit_engine_free(e);
    opt.aot_table = &selectjit_aot_table;
    opt.backend = 9;
    e = NULL;
    CHECK(selectjit_engine_new(&opt, &e) == SELECTJIT_ERR_INVALID && e == NULL, "bad backend");
}

/* two-step: cond goes into the then/else result one way; it may not grow a dim of 1 nor add
 * one. Each of these is an error on every backend, and the output is left untouched. */
static void two_step_one_way(int backend) {
    SelectjitEngine *e = engine(backend, 0, 1);
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
                        el = tensor(b, sizeof b, rows[k].e, rows[k].re, NULL);
        SelectjitTensorMut o = out_tensor(out, sizeof out, rows[k].o, rows[k].ro, NULL);
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
    SelectjitEngine *e = engine(backend, 0, 1);
    size_t s23[2] = {2, 3};
    uint8_t cond[6] = {1, 0, 1, 0, 0x80, 1};
    int32_t t[6] = {1, 2, 3, 4, 5, 6}, el[6] = {-1, -2, -3, -4, -5, -6}, out[6];
    ptrdiff_t rev[2] = {-3, -1}, rows[2] = {-3, 1}, cols[2] = {3, -1};
    /* then = t[::-1, ::-1], else rows reversed, out columns reversed. */
    SelectjitTensor c = tensor(cond, 6, s23, 2, NULL), tt = tensor_at(t, sizeof t, s23, 2, rev, 5),
                    ee = tensor_at(el, sizeof el, s23, 2, rows, 3);
    SelectjitTensorMut o = out_at(out, sizeof out, s23, 2, cols, 2);
    int s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &c, &tt, &ee, &o);
    CHECK(s == SELECTJIT_OK, "negative strides (backend %d) -> %s", backend, selectjit_status_name(s));
    /* Logical then [[6,5,4],[3,2,1]], else [[-4,-5,-6],[-1,-2,-3]]; result
     * [[6,-5,4],[-1,2,1]], stored with each row reversed. */
    int32_t want[6] = {4, -5, 6, 1, 2, -1};
    CHECK(memcmp(out, want, sizeof want) == 0, "negative-stride values (backend %d)", backend);

    /* In place on a reversed view: out is exactly then (same strides and offset). */
    int32_t io[6] = {1, 2, 3, 4, 5, 6};
    SelectjitTensorMut iot = out_at(io, sizeof io, s23, 2, rev, 5);
    SelectjitTensor iot_in = input_of(iot);
    s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &c, &iot_in, &ee, &iot);
    CHECK(s == SELECTJIT_OK, "reversed in place -> %s", selectjit_status_name(s));
    int32_t want_io[6] = {1, 2, -1, 4, -5, 6};
    CHECK(memcmp(io, want_io, sizeof want_io) == 0, "reversed in-place values (backend %d)", backend);
    /* Another layout of the same buffer is not exactly then: an overlap. */
    SelectjitTensorMut iot4 = out_at(io, sizeof io, s23, 2, rows, 3);
    s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &c, &iot_in, &ee, &iot4);
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
                    ze = tensor_at(el, 0, s03, 2, rows, 3);
    SelectjitTensorMut zo = out_at(out, 0, s03, 2, rev, 9);
    s = selectjit_select(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &zc, &zt, &ze, &zo);
    CHECK(s == SELECTJIT_OK, "zero-size reversed -> %s", selectjit_status_name(s));
    selectjit_engine_free(e);
}

/* The first version of SelectjitOptions, as an older header declared it: a program built
 * against it keeps working with this library (the fields appended since get their defaults). */
typedef struct OptionsV1 {
    uint32_t struct_size;
    int32_t backend;
    uint64_t cache_capacity;
    uint64_t threads;
} OptionsV1;

static void options(void) {
    CHECK(sizeof(OptionsV1) == SELECTJIT_OPTIONS_SIZE_V1, "v1 size %zu", sizeof(OptionsV1));
    CHECK(sizeof(SelectjitOptions) > SELECTJIT_OPTIONS_SIZE_V1, "fields were appended");
    SelectjitEngine *e = NULL;
    /* An older program's struct, followed in memory by bytes that would be an unknown tier and
     * a garbage table pointer if the library read past struct_size. */
    union {
        OptionsV1 v1;
        unsigned char bytes[sizeof(SelectjitOptions) + 16];
    } old;
    memset(old.bytes, 0xff, sizeof old.bytes);
    old.v1.struct_size = sizeof(OptionsV1);
    old.v1.backend = SELECTJIT_BACKEND_STATIC;
    old.v1.cache_capacity = 7;
    old.v1.threads = 1;
    int st = selectjit_engine_new((const SelectjitOptions *)&old.v1, &e);
    CHECK(st == SELECTJIT_OK && e != NULL, "v1 options -> %s", selectjit_status_name(st));
    if (e) {
        CHECK(stats_of(e).capacity == 7, "v1 capacity applied");
        size_t s3[1] = {3};
        uint8_t c[3] = {1, 0, 1};
        int16_t a[3] = {1, 2, 3}, b[3] = {-1, -2, -3}, o[3];
        SelectjitTensor ct = tensor(c, 3, s3, 1, NULL), at = tensor(a, 6, s3, 1, NULL), bt = tensor(b, 6, s3, 1, NULL);
        SelectjitTensorMut ot = out_tensor(o, 6, s3, 1, NULL);
        CHECK(selectjit_select(e, SELECTJIT_DTYPE_I16, SELECTJIT_MODE_NUMPY, -1, &ct, &at, &bt, &ot) == 0, "v1 engine runs");
        CHECK(o[0] == 1 && o[1] == -2 && o[2] == 3, "v1 engine values");
        CHECK(stats_of(e).static_runs == 1, "v1 backend applied (static)");
        selectjit_engine_free(e);
    }

    /* A struct cut inside an appended field: that field is not read (tier 0xffffffff would be
     * invalid). */
    SelectjitOptions o;
    memset(&o, 0xff, sizeof o);
    o.struct_size = SELECTJIT_OPTIONS_SIZE_V1 + 2;
    o.backend = SELECTJIT_BACKEND_INTERP;
    o.cache_capacity = 0;
    o.threads = 0;
    e = NULL;
    st = selectjit_engine_new(&o, &e);
    CHECK(st == SELECTJIT_OK && e != NULL, "partial field ignored -> %s", selectjit_status_name(st));
    selectjit_engine_free(e);

    /* Bad sizes: an error naming struct_size, and *out untouched. */
    SelectjitEngine *sentinel = (SelectjitEngine *)&o;
    uint32_t bad_sizes[4] = {0, 4, SELECTJIT_OPTIONS_SIZE_V1 - 1, SELECTJIT_STRUCT_SIZE_MAX + 1};
    for (int i = 0; i < 4; i++) {
        memset(&o, 0, sizeof o);
        o.struct_size = bad_sizes[i];
        e = sentinel;
        st = selectjit_engine_new(&o, &e);
        CHECK(st == SELECTJIT_ERR_STRUCT_SIZE && e == sentinel, "struct_size %u -> %s", bad_sizes[i],
              selectjit_status_name(st));
        CHECK(strstr(selectjit_last_error(), "struct_size") != NULL, "message names struct_size");
    }
    CHECK(strcmp(selectjit_status_name(SELECTJIT_ERR_STRUCT_SIZE), "struct size") == 0, "status name");
    /* A newer program's larger struct: fine while the fields this library lacks are zero. */
    union {
        SelectjitOptions o;
        unsigned char bytes[sizeof(SelectjitOptions) + 16];
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.o.struct_size = sizeof newer.bytes;
    newer.o.cache_capacity = 9;
    e = NULL;
    st = selectjit_engine_new(&newer.o, &e);
    CHECK(st == SELECTJIT_OK && e != NULL, "larger zero-tailed struct -> %s", selectjit_status_name(st));
    if (e) CHECK(stats_of(e).capacity == 9, "larger struct's capacity");
    selectjit_engine_free(e);
    newer.bytes[sizeof(SelectjitOptions) + 3] = 1;
    e = sentinel;
    st = selectjit_engine_new(&newer.o, &e);
    CHECK(st == SELECTJIT_ERR_STRUCT_SIZE && e == sentinel, "unknown field set -> %s", selectjit_status_name(st));
    CHECK(strstr(selectjit_last_error(), "newer header") != NULL, "message: %s", selectjit_last_error());

    /* Bad codes and pointers. */
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.tier = 99;
    e = sentinel;
    CHECK(selectjit_engine_new(&o, &e) == SELECTJIT_ERR_INVALID && e == sentinel, "bad tier");
    CHECK(strstr(selectjit_last_error(), "tier 99") != NULL, "tier message");
    o.tier = 0;
    o.backend = -1;
    CHECK(selectjit_engine_new(&o, &e) == SELECTJIT_ERR_INVALID && e == sentinel, "bad backend");
    o.backend = 0;
    CHECK(selectjit_engine_new(&o, NULL) == SELECTJIT_ERR_NULL_POINTER, "NULL out");

    /* Tier and exact_after: Cranelift compiling exact kernels on first sight. */
    o.tier = SELECTJIT_TIER_CRANELIFT;
    o.exact_after = 1;
    o.threads = 1;
    e = NULL;
    CHECK(selectjit_engine_new(&o, &e) == SELECTJIT_OK && e != NULL, "cranelift engine");
    if (e) {
        size_t s4[1] = {4};
        uint8_t c[4] = {1, 0, 1, 0};
        uint32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, out[4];
        SelectjitTensor ct = tensor(c, 4, s4, 1, NULL), at = tensor(a, 16, s4, 1, NULL), bt = tensor(b, 16, s4, 1, NULL);
        SelectjitTensorMut ot = out_tensor(out, 16, s4, 1, NULL);
        CHECK(selectjit_select(e, SELECTJIT_DTYPE_U32, SELECTJIT_MODE_NUMPY, -1, &ct, &at, &bt, &ot) == 0, "run");
        CHECK(out[0] == 1 && out[1] == 6 && out[2] == 3 && out[3] == 8, "values");
        SelectjitStats s = stats_of(e);
        CHECK(s.compiles == 1 && s.generic_runs == 0, "exact on first sight: compiles %llu generic %llu",
              (unsigned long long)s.compiles, (unsigned long long)s.generic_runs);
        selectjit_engine_free(e);
    }

    /* The environment: read with read_env (and with NULL options), not otherwise; the fields
     * set win over it; a malformed variable is an error naming it. */
    setenv("SELECTJIT_CACHE_CAPACITY", "77", 1);
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    e = NULL;
    CHECK(selectjit_engine_new(&o, &e) == SELECTJIT_OK && stats_of(e).capacity == 1024, "environment not read");
    selectjit_engine_free(e);
    o.read_env = 1;
    e = NULL;
    CHECK(selectjit_engine_new(&o, &e) == SELECTJIT_OK && stats_of(e).capacity == 77, "environment read");
    selectjit_engine_free(e);
    e = NULL;
    CHECK(selectjit_engine_new(NULL, &e) == SELECTJIT_OK && stats_of(e).capacity == 77, "NULL options read it");
    selectjit_engine_free(e);
    o.cache_capacity = 5;
    e = NULL;
    CHECK(selectjit_engine_new(&o, &e) == SELECTJIT_OK && stats_of(e).capacity == 5, "field over environment");
    selectjit_engine_free(e);
    setenv("SELECTJIT_CACHE_CAPACITY", "lots", 1);
    e = sentinel;
    CHECK(selectjit_engine_new(NULL, &e) == SELECTJIT_ERR_INVALID && e == sentinel, "malformed variable");
    CHECK(strstr(selectjit_last_error(), "SELECTJIT_CACHE_CAPACITY") != NULL, "names the variable");
    unsetenv("SELECTJIT_CACHE_CAPACITY");
}

/* Stats: struct_size is checked; a larger struct's counters past this library's read 0, and
 * nothing past struct_size is written; on error nothing is written. */
static void stats_sizes(void) {
    SelectjitEngine *e = engine(SELECTJIT_BACKEND_JIT, 3, 1);
    union {
        SelectjitStats s;
        unsigned char bytes[sizeof(SelectjitStats) + 32];
    } big;
    memset(&big, 0xab, sizeof big);
    big.s.struct_size = sizeof(SelectjitStats) + 16;
    CHECK(selectjit_engine_stats(e, &big.s) == SELECTJIT_OK, "larger stats struct");
    CHECK(big.s.capacity == 3 && big.s.hits == 0 && big.s.blocked_runs == 0, "counters filled");
    CHECK(big.s.reserved == 0xabababab, "reserved not written");
    int ok = 1;
    for (size_t i = sizeof(SelectjitStats); i < sizeof(SelectjitStats) + 16; i++) ok &= big.bytes[i] == 0;
    for (size_t i = sizeof(SelectjitStats) + 16; i < sizeof big; i++) ok &= big.bytes[i] == 0xab;
    CHECK(ok, "unknown counters zero, nothing past struct_size");
    CHECK(sizeof(SelectjitStats) >= SELECTJIT_STATS_SIZE_V1, "stats size");
    uint32_t bad[3] = {0, SELECTJIT_STATS_SIZE_V1 - 8, SELECTJIT_STRUCT_SIZE_MAX + 8};
    for (int k = 0; k < 3; k++) {
        memset(&big, 0xab, sizeof big);
        big.s.struct_size = bad[k];
        CHECK(selectjit_engine_stats(e, &big.s) == SELECTJIT_ERR_STRUCT_SIZE, "stats struct_size %u", bad[k]);
        ok = 1;
        for (size_t i = 4; i < sizeof big; i++) ok &= big.bytes[i] == 0xab;
        CHECK(ok, "nothing written (struct_size %u)", bad[k]);
    }
    CHECK(selectjit_engine_stats(e, NULL) == SELECTJIT_ERR_NULL_POINTER, "NULL stats");
    SelectjitStats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK(selectjit_engine_stats(NULL, &s) == SELECTJIT_ERR_NULL_POINTER, "NULL engine");
    selectjit_engine_free(e);
}

static SelectjitCond cond_of(uint32_t kind, uint32_t op, int dtype, SelectjitTensor lhs, SelectjitTensor rhs) {
    SelectjitCond c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.kind = kind;
    c.op = op;
    c.dtype = dtype;
    c.lhs = lhs;
    c.rhs = rhs;
    return c;
}

static int cmp_f64(uint32_t op, double a, double b) {
    switch (op) {
    case SELECTJIT_CMP_EQ: return a == b;
    case SELECTJIT_CMP_NE: return a != b;
    case SELECTJIT_CMP_LT: return a < b;
    case SELECTJIT_CMP_LE: return a <= b;
    case SELECTJIT_CMP_GT: return a > b;
    default: return a >= b;
    }
}

static int cmp_i64(uint32_t op, int64_t a, int64_t b) {
    switch (op) {
    case SELECTJIT_CMP_EQ: return a == b;
    case SELECTJIT_CMP_NE: return a != b;
    case SELECTJIT_CMP_LT: return a < b;
    case SELECTJIT_CMP_LE: return a <= b;
    case SELECTJIT_CMP_GT: return a > b;
    default: return a >= b;
    }
}

static int cmp_u64(uint32_t op, uint64_t a, uint64_t b) {
    switch (op) {
    case SELECTJIT_CMP_EQ: return a == b;
    case SELECTJIT_CMP_NE: return a != b;
    case SELECTJIT_CMP_LT: return a < b;
    case SELECTJIT_CMP_LE: return a <= b;
    case SELECTJIT_CMP_GT: return a > b;
    default: return a >= b;
    }
}

/* Predicates against expectations computed here with C's own operators, bytewise: every
 * comparison on f64 (NaN, ±0, ±inf), i64 and u64 (above INT64_MAX), tensor against tensor and
 * against a rank-0 scalar on either side, broadcast, negation, the tests on floats and
 * integers, a compared dtype other than the selected one, and in place (ReLU). */
static void predicates(int backend) {
    SelectjitEngine *e = engine(backend, 0, 1);
    enum { N = 8 };
    size_t sn[1] = {N};
    double nan = NAN, inf = INFINITY;
    double xd[N] = {1.5, -0.0, 0.0, nan, inf, -inf, -2.0, 3.0};
    double yd[N] = {1.5, 0.0, -1.0, nan, inf, 0.0, -2.5, nan};
    int64_t xi[N] = {INT64_MIN, -1, 0, 1, INT64_MAX, 5, -5, 7};
    int64_t yi[N] = {INT64_MIN, 1, 0, -1, INT64_MAX - 1, 5, -4, 8};
    uint64_t xu[N] = {0, 1, UINT64_MAX, (uint64_t)INT64_MAX + 1, 5, 9, 3, 2};
    uint64_t yu[N] = {1, 1, 0, (uint64_t)INT64_MAX, 5, 8, 4, 2};
    double zero_d = 0.0;
    int64_t three = 3;
    /* then/else: u16, so the selected dtype differs from the compared one. */
    uint16_t tv[N], ev[N], out[N], want[N];
    for (int i = 0; i < N; i++) tv[i] = (uint16_t)(100 + i), ev[i] = (uint16_t)(200 + i);
    SelectjitTensor tt = tensor(tv, sizeof tv, sn, 1, NULL), et = tensor(ev, sizeof ev, sn, 1, NULL);
    SelectjitTensorMut ot = out_tensor(out, sizeof out, sn, 1, NULL);
    SelectjitTensor xdt = tensor(xd, sizeof xd, sn, 1, NULL), ydt = tensor(yd, sizeof yd, sn, 1, NULL),
                    xit = tensor(xi, sizeof xi, sn, 1, NULL), yit = tensor(yi, sizeof yi, sn, 1, NULL),
                    xut = tensor(xu, sizeof xu, sn, 1, NULL), yut = tensor(yu, sizeof yu, sn, 1, NULL),
                    zd = tensor(&zero_d, 8, NULL, 0, NULL), i3 = tensor(&three, 8, NULL, 0, NULL);
    for (uint32_t op = SELECTJIT_CMP_EQ; op <= SELECTJIT_CMP_GE; op++) {
        for (int neg = 0; neg < 2; neg++) {
            struct { SelectjitCond c; int kind; } cases[5] = {
                {cond_of(SELECTJIT_COND_CMP, op, SELECTJIT_DTYPE_F64, xdt, ydt), 0},
                {cond_of(SELECTJIT_COND_CMP, op, SELECTJIT_DTYPE_F64, xdt, zd), 1},
                {cond_of(SELECTJIT_COND_CMP, op, SELECTJIT_DTYPE_F64, zd, xdt), 2},
                {cond_of(SELECTJIT_COND_CMP, op, SELECTJIT_DTYPE_I64, xit, yit), 3},
                {cond_of(SELECTJIT_COND_CMP, op, SELECTJIT_DTYPE_U64, xut, yut), 4},
            };
            for (int k = 0; k < 5; k++) {
                cases[k].c.negate = (uint32_t)neg;
                for (int i = 0; i < N; i++) {
                    int p = cases[k].kind == 0   ? cmp_f64(op, xd[i], yd[i])
                            : cases[k].kind == 1 ? cmp_f64(op, xd[i], 0.0)
                            : cases[k].kind == 2 ? cmp_f64(op, 0.0, xd[i])
                            : cases[k].kind == 3 ? cmp_i64(op, xi[i], yi[i])
                                                 : cmp_u64(op, xu[i], yu[i]);
                    want[i] = (p ^ neg) ? tv[i] : ev[i];
                    out[i] = 0xdead;
                }
                int s = selectjit_select_cond(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, &cases[k].c, &tt, &et, &ot);
                CHECK(s == SELECTJIT_OK, "cmp op %u case %d neg %d (backend %d) -> %s", op, k, neg, backend,
                      selectjit_status_name(s));
                CHECK(memcmp(out, want, sizeof want) == 0, "cmp op %u case %d neg %d values (backend %d)", op, k, neg,
                      backend);
            }
        }
    }
    /* Broadcast: lhs [4] against rhs [2,1] gives the cond [2,4]; then [2,4] f32, else scalar. */
    int64_t l4[4] = {1, 3, 5, 7}, r2[2] = {3, 6};
    size_t s4[1] = {4}, s21[2] = {2, 1}, s24[2] = {2, 4};
    float t8[8] = {1, 2, 3, 4, 5, 6, 7, 8}, minus0 = -0.0f, o8[8], w8[8];
    SelectjitCond bc = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_LT, SELECTJIT_DTYPE_I64, tensor(l4, 32, s4, 1, NULL),
                               tensor(r2, 16, s21, 2, NULL));
    SelectjitTensor t8t = tensor(t8, 32, s24, 2, NULL), m0 = tensor(&minus0, 4, NULL, 0, NULL);
    SelectjitTensorMut o8t = out_tensor(o8, 32, s24, 2, NULL);
    for (int i = 0; i < 8; i++) w8[i] = l4[i % 4] < r2[i / 4] ? t8[i] : -0.0f;
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &bc, &t8t, &m0, &o8t) == 0, "broadcast cmp");
    CHECK(memcmp(o8, w8, sizeof w8) == 0, "broadcast cmp values (backend %d)", backend);
    /* Integer against an integer scalar. */
    SelectjitCond ic = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_GE, SELECTJIT_DTYPE_I64, xit, i3);
    for (int i = 0; i < N; i++) want[i] = xi[i] >= 3 ? tv[i] : ev[i];
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, &ic, &tt, &et, &ot) == 0, "i64 >= 3");
    CHECK(memcmp(out, want, sizeof want) == 0, "i64 >= 3 values");

    /* Tests: isnan / isinf / isfinite on f64 and f32, and on integers. */
    float xf[N];
    for (int i = 0; i < N; i++) xf[i] = (float)xd[i];
    SelectjitTensor xft = tensor(xf, sizeof xf, sn, 1, NULL);
    uint32_t kinds[3] = {SELECTJIT_COND_ISNAN, SELECTJIT_COND_ISINF, SELECTJIT_COND_ISFINITE};
    for (int k = 0; k < 3; k++) {
        for (int neg = 0; neg < 2; neg++) {
            for (int w = 0; w < 3; w++) {
                SelectjitCond c = cond_of(kinds[k], 0, w == 0 ? SELECTJIT_DTYPE_F64 : w == 1 ? SELECTJIT_DTYPE_F32 : SELECTJIT_DTYPE_I64,
                                          w == 0 ? xdt : w == 1 ? xft : xit, tensor(NULL, 0, NULL, 0, NULL));
                c.negate = (uint32_t)neg;
                for (int i = 0; i < N; i++) {
                    double v = w == 0 ? xd[i] : w == 1 ? (double)xf[i] : 1.0;
                    int p = k == 0 ? isnan(v) != 0 : k == 1 ? isinf(v) != 0 : isfinite(v) != 0;
                    want[i] = (p ^ neg) ? tv[i] : ev[i];
                    out[i] = 0xdead;
                }
                int s = selectjit_select_cond(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, &c, &tt, &et, &ot);
                CHECK(s == SELECTJIT_OK, "test %d width %d neg %d -> %s", k, w, neg, selectjit_status_name(s));
                CHECK(memcmp(out, want, sizeof want) == 0, "test %d width %d neg %d values (backend %d)", k, w, neg,
                      backend);
            }
        }
    }
    /* A mask through SelectjitCond. */
    uint8_t mask[N] = {1, 0, 0x80, 0, 2, 0, 0, 1};
    SelectjitCond mc = cond_of(SELECTJIT_COND_MASK, 0, 0, tensor(mask, N, sn, 1, NULL), tensor(NULL, 0, NULL, 0, NULL));
    mc.negate = 1;
    for (int i = 0; i < N; i++) want[i] = mask[i] ? ev[i] : tv[i];
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, &mc, &tt, &et, &ot) == 0, "negated mask");
    CHECK(memcmp(out, want, sizeof want) == 0, "negated mask values");

    /* In-place ReLU: x = x > 0 ? x : 0, x being then, out and the compared operand. */
    float x[N] = {-1.5f, 2.0f, -0.0f, NAN, 3.0f, -INFINITY, INFINITY, 1e-45f}, zero = 0.0f, wx[N];
    for (int i = 0; i < N; i++) wx[i] = x[i] > 0 ? x[i] : 0.0f;
    SelectjitTensorMut xo = out_tensor(x, sizeof x, sn, 1, NULL);
    SelectjitTensor xin = input_of(xo), zt = tensor(&zero, 4, NULL, 0, NULL);
    SelectjitCond relu = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_GT, SELECTJIT_DTYPE_F32, xin, zt);
    int s = selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &relu, &xin, &zt, &xo);
    CHECK(s == SELECTJIT_OK, "in-place relu (backend %d) -> %s", backend, selectjit_status_name(s));
    CHECK(memcmp(x, wx, sizeof wx) == 0, "in-place relu values (backend %d)", backend);
    /* In place as else: x = isnan(x) ? 7 : x. */
    float y[N] = {NAN, 1.0f, -NAN, -0.0f, 2.0f, NAN, 0.0f, 5.0f}, seven = 7.0f, wy[N];
    for (int i = 0; i < N; i++) wy[i] = isnan(y[i]) ? 7.0f : y[i];
    SelectjitTensorMut yo = out_tensor(y, sizeof y, sn, 1, NULL);
    SelectjitTensor yin = input_of(yo), st7 = tensor(&seven, 4, NULL, 0, NULL);
    SelectjitCond isn = cond_of(SELECTJIT_COND_ISNAN, 0, SELECTJIT_DTYPE_F32, yin, tensor(NULL, 0, NULL, 0, NULL));
    s = selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &isn, &st7, &yin, &yo);
    CHECK(s == SELECTJIT_OK && memcmp(y, wy, sizeof wy) == 0, "in-place nan_to_num (backend %d)", backend);
    selectjit_engine_free(e);
}

/* Hostile predicate calls: each an error code and message, and the output untouched. */
static void predicate_errors(void) {
    SelectjitEngine *e = engine(SELECTJIT_BACKEND_JIT, 0, 1);
    enum { N = 4 };
    size_t sn[1] = {N}, s3[1] = {3}, big[65];
    for (int i = 0; i < 65; i++) big[i] = 1;
    float x[N] = {1, -1, 2, -2}, y[N] = {0, 0, 0, 0}, out[N], keep[N] = {42, 42, 42, 42};
    double d[N] = {1, 2, 3, 4};
    double rawbuf[N + 1];
    unsigned char *raw = (unsigned char *)rawbuf;
    memcpy(raw + 1, x, sizeof x); /* misaligned f32 elements */
    SelectjitTensor xt = tensor(x, sizeof x, sn, 1, NULL), yt = tensor(y, sizeof y, sn, 1, NULL),
                    dt = tensor(d, sizeof d, sn, 1, NULL), none = tensor(NULL, 0, NULL, 0, NULL);
    SelectjitTensorMut ot = out_tensor(out, sizeof out, sn, 1, NULL);
    struct { SelectjitCond c; int want; const char *msg; } bad[16];
    int n = 0;
#define BAD(cexpr, code, m) do { bad[n].c = (cexpr); bad[n].want = (code); bad[n].msg = (m); n++; } while (0)
    SelectjitCond c = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_LT, SELECTJIT_DTYPE_F32, xt, yt);
    SelectjitCond k;
    k = c; k.struct_size = 8; BAD(k, SELECTJIT_ERR_STRUCT_SIZE, "struct_size");
    k = c; k.struct_size = SELECTJIT_STRUCT_SIZE_MAX + 1; BAD(k, SELECTJIT_ERR_STRUCT_SIZE, "absurdly large");
    k = c; k.kind = 9; BAD(k, SELECTJIT_ERR_INVALID, "unknown kind 9");
    k = c; k.op = 6; BAD(k, SELECTJIT_ERR_INVALID, "unknown comparison 6");
    k = c; k.dtype = 99; BAD(k, SELECTJIT_ERR_DTYPE, "unknown dtype code 99");
    k = c; k.dtype = -1; BAD(k, SELECTJIT_ERR_DTYPE, "unknown dtype code -1");
    k = c; k.reserved = 1; BAD(k, SELECTJIT_ERR_INVALID, "reserved");
    k = c; k.lhs.len_bytes = 12; BAD(k, SELECTJIT_ERR_LAYOUT, "lhs");
    k = c; k.rhs.data = NULL; BAD(k, SELECTJIT_ERR_NULL_POINTER, "rhs: data is NULL");
    k = c; k.lhs.shape = NULL; BAD(k, SELECTJIT_ERR_NULL_POINTER, "shape is NULL");
    k = c; k.lhs.shape = big; k.lhs.rank = 65; BAD(k, SELECTJIT_ERR_INVALID, "rank 65");
    k = c; k.rhs = tensor(y, 12, s3, 1, NULL); BAD(k, SELECTJIT_ERR_BROADCAST, "");
    k = c; k.dtype = SELECTJIT_DTYPE_F64; k.rhs = dt; BAD(k, SELECTJIT_ERR_LAYOUT, "lhs"); /* 16 bytes: 2 f64 */
    k = c; k.lhs = input_of(ot); BAD(k, SELECTJIT_ERR_OVERLAP, "overlaps cond lhs");
    k = c; k.kind = SELECTJIT_COND_MASK; k.lhs = input_of(ot); BAD(k, SELECTJIT_ERR_OVERLAP, "overlaps cond");
    k = c; k.kind = SELECTJIT_COND_ISINF; k.lhs = none; BAD(k, SELECTJIT_ERR_LAYOUT, "");
#undef BAD
    for (int i = 0; i < n; i++) {
        memcpy(out, keep, sizeof out);
        int s = selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &bad[i].c, &xt, &yt, &ot);
        CHECK(s == bad[i].want, "bad cond %d -> %s (want %s)", i, selectjit_status_name(s), selectjit_status_name(bad[i].want));
        CHECK(strlen(selectjit_last_error()) > 0 && strstr(selectjit_last_error(), bad[i].msg) != NULL,
              "bad cond %d message: %s", i, selectjit_last_error());
        CHECK(memcmp(out, keep, sizeof out) == 0, "bad cond %d: output untouched", i);
    }
    memcpy(out, keep, sizeof out);
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, NULL, &xt, &yt, &ot) ==
              SELECTJIT_ERR_NULL_POINTER, "NULL cond");
    CHECK(selectjit_select_cond(NULL, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &xt, &yt, &ot) ==
              SELECTJIT_ERR_NULL_POINTER, "NULL engine");
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, &xt, &yt, NULL) ==
              SELECTJIT_ERR_NULL_POINTER, "NULL out");
    CHECK(selectjit_select_cond(e, 77, SELECTJIT_MODE_NUMPY, -1, &c, &xt, &yt, &ot) == SELECTJIT_ERR_DTYPE, "bad dtype");
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, 9, -1, &c, &xt, &yt, &ot) == SELECTJIT_ERR_INVALID, "bad mode");
    /* The operand is the output but the select is not in place: an overlap. */
    SelectjitTensor oin = input_of(ot);
    SelectjitCond self = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_GT, SELECTJIT_DTYPE_F32, oin, yt);
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &self, &xt, &yt, &ot) ==
              SELECTJIT_ERR_OVERLAP, "operand is out, not in place");
    /* In place, the operand is the output with another dtype: refused. */
    SelectjitCond other = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_GT, SELECTJIT_DTYPE_I32, oin, yt);
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &other, &oin, &yt, &ot) ==
              SELECTJIT_ERR_DTYPE, "in-place operand of another dtype");
    CHECK(memcmp(out, keep, sizeof out) == 0, "output untouched");
    /* A larger SelectjitCond (newer header): fine while the unknown bytes are zero. */
    union {
        SelectjitCond c;
        unsigned char bytes[sizeof(SelectjitCond) + 8];
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.c = c;
    newer.c.struct_size = sizeof newer.bytes;
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &newer.c, &xt, &yt, &ot) == 0, "newer cond");
    float wn[N] = {0, -1, 0, -2};
    CHECK(memcmp(out, wn, sizeof wn) == 0, "x < 0 ? x : 0");
    memcpy(out, keep, sizeof out);
    newer.bytes[sizeof(SelectjitCond) + 2] = 5;
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &newer.c, &xt, &yt, &ot) ==
              SELECTJIT_ERR_STRUCT_SIZE, "newer cond with an unknown field");
    CHECK(memcmp(out, keep, sizeof out) == 0, "output untouched");
    /* Misaligned elements are read as they are (byte-level API). */
    SelectjitCond mis = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_GT, SELECTJIT_DTYPE_F32, tensor(raw + 1, sizeof x, sn, 1, NULL), yt);
    int s = selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &mis, &xt, &yt, &ot);
    float wm[N] = {1, 0, 2, 0};
    CHECK(s == SELECTJIT_OK && memcmp(out, wm, sizeof wm) == 0, "misaligned operand -> %s", selectjit_status_name(s));
    selectjit_engine_free(e);
}

/* A placeholder operand of selectjit_prepare_cond: no data, the shape of the buffer given at
 * every run. */
static SelectjitTensor placeholder(const size_t *shape, size_t rank) {
    return tensor(NULL, 0, shape, rank, NULL);
}

/* Prepared predicate calls (selectjit_prepare_cond / selectjit_prepared_run_cond) against
 * expectations computed here and against selectjit_select_cond on the same call, bytewise:
 * ReLU run twice, a BERT-style masked fill (i64 mask [2,1,1,4] over f32 scores [2,3,4,4]) and
 * its negation, every comparison of two u64 placeholders (above INT64_MAX), a value on the
 * left, broadcast placeholders, the tests. */
static void prepared_predicates(int backend) {
    SelectjitEngine *e = engine(backend, 0, 1);
    enum { N = 8 };
    size_t sn[1] = {N};
    /* ReLU: out = x > 0 ? x : 0, x the placeholder and then. */
    float zero = 0.0f, x[N], out[N], want[N];
    SelectjitCond relu = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_GT, SELECTJIT_DTYPE_F32, placeholder(sn, 1),
                                 tensor(&zero, 4, NULL, 0, NULL));
    SelectjitPrepared *p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &relu, sn, 1, NULL, 0);
    CHECK(p != NULL, "prepare relu (backend %d)", backend);
    float rounds[2][N] = {{-1.5f, 2.0f, -0.0f, NAN, 3.0f, -INFINITY, INFINITY, 1e-45f},
                          {5.0f, -5.0f, 0.0f, -NAN, 1e-45f, -1e-45f, 7.0f, -7.0f}};
    for (int r = 0; r < 2; r++) {
        memcpy(x, rounds[r], sizeof x);
        for (int i = 0; i < N; i++) want[i] = x[i] > 0 ? x[i] : 0.0f, out[i] = 42.0f;
        int s = selectjit_prepared_run_cond(p, (uint8_t *)x, sizeof x, NULL, 0, (uint8_t *)x, sizeof x,
                                            (uint8_t *)&zero, 4, (uint8_t *)out, sizeof out);
        CHECK(s == SELECTJIT_OK, "relu round %d (backend %d) -> %s", r, backend, selectjit_status_name(s));
        CHECK(memcmp(out, want, sizeof want) == 0, "relu round %d values (backend %d)", r, backend);
    }
    selectjit_prepared_free(p);

    /* BERT's masked fill: out = mask == 0 ? -inf : scores. */
    enum { B = 2, H = 3, L = 4, M = B * H * L * L };
    size_t ms[4] = {B, 1, 1, L}, ss[4] = {B, H, L, L};
    int64_t mask[B * L] = {1, 1, 0, 1, 1, 0, 0, 0}, zero_i = 0;
    float scores[M], fill = -INFINITY, fo[M], fw[M], so[M];
    for (int i = 0; i < M; i++) scores[i] = (float)i * 0.5f - 10.0f;
    for (int i = 0; i < M; i++) fw[i] = mask[(i / (H * L * L)) * L + i % L] == 0 ? fill : scores[i];
    SelectjitCond bert = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_EQ, SELECTJIT_DTYPE_I64, placeholder(ms, 4),
                                 tensor(&zero_i, 8, NULL, 0, NULL));
    p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &bert, NULL, 0, ss, 4);
    CHECK(p != NULL, "prepare masked fill (backend %d)", backend);
    memset(fo, 0, sizeof fo);
    CHECK(selectjit_prepared_run_cond(p, (uint8_t *)mask, sizeof mask, NULL, 0, (uint8_t *)&fill, 4,
                                      (uint8_t *)scores, sizeof scores, (uint8_t *)fo, sizeof fo) == 0,
          "masked fill run (backend %d)", backend);
    CHECK(memcmp(fo, fw, sizeof fw) == 0, "masked fill values (backend %d)", backend);
    selectjit_prepared_free(p);
    /* The same through selectjit_select_cond: identical bytes. */
    SelectjitCond bert_view = bert;
    bert_view.lhs = tensor(mask, sizeof mask, ms, 4, NULL);
    SelectjitTensor ft = tensor(&fill, 4, NULL, 0, NULL), st = tensor(scores, sizeof scores, ss, 4, NULL);
    SelectjitTensorMut sot = out_tensor(so, sizeof so, ss, 4, NULL);
    CHECK(selectjit_select_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &bert_view, &ft, &st, &sot) == 0 &&
              memcmp(so, fo, sizeof fo) == 0,
          "masked fill as selectjit_select_cond (backend %d)", backend);
    /* Negated (mask != 0, negate: then and else keep their places for the shapes). */
    SelectjitCond keep = bert;
    keep.op = SELECTJIT_CMP_NE;
    keep.negate = 1;
    p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &keep, NULL, 0, ss, 4);
    CHECK(p != NULL, "prepare negated fill");
    memset(fo, 0, sizeof fo);
    CHECK(selectjit_prepared_run_cond(p, (uint8_t *)mask, sizeof mask, NULL, 0, (uint8_t *)&fill, 4,
                                      (uint8_t *)scores, sizeof scores, (uint8_t *)fo, sizeof fo) == 0 &&
              memcmp(fo, fw, sizeof fw) == 0,
          "negated masked fill (backend %d)", backend);
    selectjit_prepared_free(p);

    /* Two u64 placeholders, every comparison, negated or not; then / else u16. */
    uint64_t xu[N] = {0, 1, UINT64_MAX, (uint64_t)INT64_MAX + 1, 5, 9, 3, 2};
    uint64_t yu[N] = {1, 1, 0, (uint64_t)INT64_MAX, 5, 8, 4, 2};
    uint16_t tv[N], ev[N], uo[N], uw[N];
    for (int i = 0; i < N; i++) tv[i] = (uint16_t)(100 + i), ev[i] = (uint16_t)(200 + i);
    for (uint32_t op = SELECTJIT_CMP_EQ; op <= SELECTJIT_CMP_GE; op++) {
        for (int neg = 0; neg < 2; neg++) {
            SelectjitCond c = cond_of(SELECTJIT_COND_CMP, op, SELECTJIT_DTYPE_U64, placeholder(sn, 1), placeholder(sn, 1));
            c.negate = (uint32_t)neg;
            p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, &c, sn, 1, sn, 1);
            CHECK(p != NULL, "prepare u64 op %u neg %d", op, neg);
            for (int i = 0; i < N; i++) uw[i] = (cmp_u64(op, xu[i], yu[i]) ^ neg) ? tv[i] : ev[i], uo[i] = 0xdead;
            int s = selectjit_prepared_run_cond(p, (uint8_t *)xu, sizeof xu, (uint8_t *)yu, sizeof yu, (uint8_t *)tv,
                                                sizeof tv, (uint8_t *)ev, sizeof ev, (uint8_t *)uo, sizeof uo);
            CHECK(s == SELECTJIT_OK && memcmp(uo, uw, sizeof uw) == 0, "u64 op %u neg %d values (backend %d)", op, neg,
                  backend);
            selectjit_prepared_free(p);
        }
    }
    /* A value on the left: 0.0 < x (f64), x the rhs placeholder; lhs passed as NULL, 0. */
    double xd[N] = {1.5, -0.0, 0.0, NAN, INFINITY, -INFINITY, -2.0, 3.0}, zd = 0.0;
    SelectjitCond lv = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_LT, SELECTJIT_DTYPE_F64, tensor(&zd, 8, NULL, 0, NULL),
                               placeholder(sn, 1));
    p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, &lv, sn, 1, sn, 1);
    CHECK(p != NULL, "prepare 0 < x");
    for (int i = 0; i < N; i++) uw[i] = 0.0 < xd[i] ? tv[i] : ev[i];
    CHECK(selectjit_prepared_run_cond(p, NULL, 0, (uint8_t *)xd, sizeof xd, (uint8_t *)tv, sizeof tv, (uint8_t *)ev,
                                      sizeof ev, (uint8_t *)uo, sizeof uo) == 0 &&
              memcmp(uo, uw, sizeof uw) == 0,
          "0 < x values (backend %d)", backend);
    selectjit_prepared_free(p);
    /* Broadcast placeholders: lhs [4] against rhs [2,1] gives the cond [2,4]. */
    int64_t l4[4] = {1, 3, 5, 7}, r2[2] = {3, 6};
    size_t s4[1] = {4}, s21[2] = {2, 1}, s24[2] = {2, 4};
    float t8[8] = {1, 2, 3, 4, 5, 6, 7, 8}, minus0 = -0.0f, o8[8], w8[8];
    for (int i = 0; i < 8; i++) w8[i] = l4[i % 4] < r2[i / 4] ? t8[i] : -0.0f;
    SelectjitCond bc = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_LT, SELECTJIT_DTYPE_I64, placeholder(s4, 1),
                               placeholder(s21, 2));
    p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &bc, s24, 2, NULL, 0);
    CHECK(p != NULL, "prepare broadcast cmp");
    CHECK(selectjit_prepared_run_cond(p, (uint8_t *)l4, sizeof l4, (uint8_t *)r2, sizeof r2, (uint8_t *)t8, sizeof t8,
                                      (uint8_t *)&minus0, 4, (uint8_t *)o8, sizeof o8) == 0 &&
              memcmp(o8, w8, sizeof w8) == 0,
          "broadcast cmp values (backend %d)", backend);
    selectjit_prepared_free(p);
    /* The tests on f32, negated or not. */
    float xf[N] = {1.5f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 1e-45f, 3.0f};
    uint32_t kinds[3] = {SELECTJIT_COND_ISNAN, SELECTJIT_COND_ISINF, SELECTJIT_COND_ISFINITE};
    for (int k = 0; k < 3; k++) {
        for (int neg = 0; neg < 2; neg++) {
            SelectjitCond c = cond_of(kinds[k], 0, SELECTJIT_DTYPE_F32, placeholder(sn, 1), tensor(NULL, 0, NULL, 0, NULL));
            c.negate = (uint32_t)neg;
            p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_U16, SELECTJIT_MODE_NUMPY, -1, &c, sn, 1, sn, 1);
            CHECK(p != NULL, "prepare test %d neg %d", k, neg);
            for (int i = 0; i < N; i++) {
                int t = k == 0 ? isnan(xf[i]) != 0 : k == 1 ? isinf(xf[i]) != 0 : isfinite(xf[i]) != 0;
                uw[i] = (t ^ neg) ? tv[i] : ev[i];
            }
            CHECK(selectjit_prepared_run_cond(p, (uint8_t *)xf, sizeof xf, NULL, 0, (uint8_t *)tv, sizeof tv, (uint8_t *)ev,
                                              sizeof ev, (uint8_t *)uo, sizeof uo) == 0 &&
                      memcmp(uo, uw, sizeof uw) == 0,
                  "test %d neg %d values (backend %d)", k, neg, backend);
            selectjit_prepared_free(p);
        }
    }
    selectjit_engine_free(e);
}

/* Hostile prepared predicate calls: NULL from selectjit_prepare_cond with a message, or an error
 * code from the run with the output untouched. */
static void prepared_predicate_errors(void) {
    SelectjitEngine *e = engine(SELECTJIT_BACKEND_JIT, 0, 1);
    enum { N = 4 };
    size_t sn[1] = {N}, s3[1] = {3};
    ptrdiff_t one[1] = {1};
    float x[N] = {1, -1, 2, -2}, zero = 0.0f, out[N], keep[N] = {42, 42, 42, 42};
    SelectjitCond c = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_GT, SELECTJIT_DTYPE_F32, placeholder(sn, 1),
                              tensor(&zero, 4, NULL, 0, NULL));
    struct { SelectjitCond c; const char *msg; } bad[8];
    int n = 0;
    SelectjitCond k;
    k = c; k.kind = SELECTJIT_COND_MASK; bad[n].c = k; bad[n++].msg = "selectjit_prepare";
    k = c; k.lhs = tensor(x, sizeof x, sn, 1, NULL); bad[n].c = k; bad[n++].msg = "placeholder";
    k = c; k.lhs.strides = one; bad[n].c = k; bad[n++].msg = "strides must be NULL";
    k = c; k.rhs = placeholder(s3, 1); bad[n].c = k; bad[n++].msg = "dim 0";
    k = c; k.struct_size = 8; bad[n].c = k; bad[n++].msg = "struct_size";
    k = c; k.rhs = tensor(&zero, 2, NULL, 0, NULL); bad[n].c = k; bad[n++].msg = "rhs";
    for (int i = 0; i < n; i++) {
        SelectjitPrepared *p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &bad[i].c, sn, 1, NULL, 0);
        CHECK(p == NULL, "bad prepared cond %d accepted", i);
        CHECK(strstr(selectjit_last_error(), bad[i].msg) != NULL, "bad prepared cond %d message: %s", i,
              selectjit_last_error());
        selectjit_prepared_free(p);
    }
    CHECK(selectjit_prepare_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, NULL, sn, 1, NULL, 0) == NULL &&
              strstr(selectjit_last_error(), "NULL") != NULL,
          "NULL cond");
    CHECK(selectjit_prepare_cond(NULL, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, sn, 1, NULL, 0) == NULL,
          "NULL engine");
    CHECK(selectjit_prepare_cond(e, 99, SELECTJIT_MODE_NUMPY, -1, &c, sn, 1, NULL, 0) == NULL, "bad dtype");
    CHECK(selectjit_prepare_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, s3, 1, NULL, 0) == NULL &&
              strstr(selectjit_last_error(), "broadcast") != NULL,
          "then [3] against the predicate [4]");

    SelectjitPrepared *p = selectjit_prepare_cond(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, &c, sn, 1, NULL, 0);
    CHECK(p != NULL, "prepare x > 0");
    const uint8_t *xb = (const uint8_t *)x, *zb = (const uint8_t *)&zero;
    uint8_t *ob = (uint8_t *)out;
    struct { int got, want; const char *msg; } runs[8];
    int m = 0;
#define RUN(call, code, text) do { memcpy(out, keep, sizeof out); runs[m].got = (call); runs[m].want = (code); runs[m].msg = (text); \
        CHECK(memcmp(out, keep, sizeof out) == 0, "run error %d: output untouched", m); m++; } while (0)
    RUN(selectjit_prepared_run_cond(p, xb, 12, NULL, 0, xb, 16, zb, 4, ob, 16), SELECTJIT_ERR_LAYOUT, "3 elements of f32");
    RUN(selectjit_prepared_run_cond(p, xb, 16, zb, 4, xb, 16, zb, 4, ob, 16), SELECTJIT_ERR_INVALID, "rhs: the prepared condition");
    RUN(selectjit_prepared_run_cond(p, NULL, 16, NULL, 0, xb, 16, zb, 4, ob, 16), SELECTJIT_ERR_NULL_POINTER, "lhs is NULL");
    RUN(selectjit_prepared_run_cond(p, ob, 16, NULL, 0, xb, 16, zb, 4, ob, 16), SELECTJIT_ERR_OVERLAP, "overlaps");
    RUN(selectjit_prepared_run_cond(p, xb, 16, NULL, 0, xb, 16, zb, 4, ob, 12), SELECTJIT_ERR_LAYOUT, "output");
    RUN(selectjit_prepared_run(p, xb, 4, xb, 16, zb, 4, ob, 16), SELECTJIT_ERR_INVALID, "prepared for a predicate");
    RUN(selectjit_prepared_run_cond(NULL, xb, 16, NULL, 0, xb, 16, zb, 4, ob, 16), SELECTJIT_ERR_NULL_POINTER, "NULL");
    SelectjitPrepared *mp = selectjit_prepare(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, -1, sn, 1, sn, 1, NULL, 0);
    RUN(selectjit_prepared_run_cond(mp, xb, 16, NULL, 0, xb, 16, zb, 4, ob, 16), SELECTJIT_ERR_INVALID, "prepared for a mask");
#undef RUN
    for (int i = 0; i < m; i++) {
        CHECK(runs[i].got == runs[i].want, "run error %d -> %s (want %s)", i, selectjit_status_name(runs[i].got),
              selectjit_status_name(runs[i].want));
    }
    /* The messages: the last one is the thread's last error; the others checked one by one. */
    CHECK(strstr(selectjit_last_error(), runs[m - 1].msg) != NULL, "mask call message: %s", selectjit_last_error());
    for (int i = 0; i < m - 1; i++) {
        memcpy(out, keep, sizeof out);
        switch (i) {
        case 0: selectjit_prepared_run_cond(p, xb, 12, NULL, 0, xb, 16, zb, 4, ob, 16); break;
        case 1: selectjit_prepared_run_cond(p, xb, 16, zb, 4, xb, 16, zb, 4, ob, 16); break;
        case 2: selectjit_prepared_run_cond(p, NULL, 16, NULL, 0, xb, 16, zb, 4, ob, 16); break;
        case 3: selectjit_prepared_run_cond(p, ob, 16, NULL, 0, xb, 16, zb, 4, ob, 16); break;
        case 4: selectjit_prepared_run_cond(p, xb, 16, NULL, 0, xb, 16, zb, 4, ob, 12); break;
        case 5: selectjit_prepared_run(p, xb, 4, xb, 16, zb, 4, ob, 16); break;
        default: selectjit_prepared_run_cond(NULL, xb, 16, NULL, 0, xb, 16, zb, 4, ob, 16); break;
        }
        CHECK(strstr(selectjit_last_error(), runs[i].msg) != NULL, "run error %d message: %s", i, selectjit_last_error());
    }
    /* And a good run after all that. */
    float want[N] = {1, 0, 2, 0};
    CHECK(selectjit_prepared_run_cond(p, xb, 16, NULL, 0, xb, 16, zb, 4, ob, 16) == 0 && memcmp(out, want, sizeof want) == 0,
          "x > 0 ? x : 0");
    selectjit_prepared_free(mp);
    selectjit_prepared_free(p);
    selectjit_engine_free(e);
}

/* The n-way select: numpy.nan_to_num on f32 (three predicates, scalar values, x the default),
   into a new buffer and in place (conditions and default the output), and its errors. */
static void nway(int backend) {
    SelectjitEngine *e = engine(backend, 0, 0);
    enum { N = 1000 };
    float x[N], out[N], want[N], big = FLT_MAX, small = -FLT_MAX, zero = 0.0f, pinf = INFINITY, ninf = -INFINITY;
    for (int i = 0; i < N; i++) {
        x[i] = i % 7 == 0 ? NAN : i % 11 == 0 ? INFINITY : i % 13 == 0 ? -INFINITY : (float)i - 500.0f;
        want[i] = isnan(x[i]) ? 0.0f : x[i] == INFINITY ? FLT_MAX : x[i] == -INFINITY ? -FLT_MAX : x[i];
        out[i] = 123.0f;
    }
    size_t sn[1] = {N};
    SelectjitTensor xt = tensor(x, sizeof x, sn, 1, NULL), none = tensor(NULL, 0, NULL, 0, NULL);
    SelectjitTensor zt = tensor(&zero, 4, NULL, 0, NULL), bt = tensor(&big, 4, NULL, 0, NULL),
                    st = tensor(&small, 4, NULL, 0, NULL), pt = tensor(&pinf, 4, NULL, 0, NULL),
                    nt = tensor(&ninf, 4, NULL, 0, NULL);
    SelectjitCond c[3] = {
        cond_of(SELECTJIT_COND_ISNAN, 0, SELECTJIT_DTYPE_F32, xt, none),
        cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_EQ, SELECTJIT_DTYPE_F32, xt, pt),
        cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_EQ, SELECTJIT_DTYPE_F32, xt, nt),
    };
    const SelectjitCond *cs[3] = {&c[0], &c[1], &c[2]};
    const SelectjitTensor *vs[3] = {&zt, &bt, &st};
    SelectjitTensorMut ot = out_tensor(out, sizeof out, sn, 1, NULL);
    int s = selectjit_select_n(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, 3, cs, vs, &xt, &ot);
    CHECK(s == SELECTJIT_OK, "nway (backend %d) -> %s", backend, selectjit_status_name(s));
    CHECK(memcmp(out, want, sizeof want) == 0, "nway values (backend %d)", backend);
    /* In place: x = nan_to_num(x), the predicates and the default reading x as it was. */
    float y[N];
    memcpy(y, x, sizeof y);
    SelectjitTensor yt = tensor(y, sizeof y, sn, 1, NULL);
    SelectjitTensorMut yo = out_tensor(y, sizeof y, sn, 1, NULL);
    SelectjitCond d[3] = {
        cond_of(SELECTJIT_COND_ISNAN, 0, SELECTJIT_DTYPE_F32, yt, none),
        cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_EQ, SELECTJIT_DTYPE_F32, yt, pt),
        cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_EQ, SELECTJIT_DTYPE_F32, yt, nt),
    };
    const SelectjitCond *ds[3] = {&d[0], &d[1], &d[2]};
    s = selectjit_select_n(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, 3, ds, vs, &yt, &yo);
    CHECK(s == SELECTJIT_OK, "nway in place (backend %d) -> %s", backend, selectjit_status_name(s));
    CHECK(memcmp(y, want, sizeof want) == 0, "nway in place values (backend %d)", backend);
    /* Errors write nothing: no condition; a NULL condition; an output overlapping a value
       without being it; a short last condition's buffer. */
    for (int i = 0; i < N; i++) out[i] = 123.0f;
    CHECK(selectjit_select_n(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, 0, cs, vs, &xt, &ot) == SELECTJIT_ERR_INVALID,
          "nway n = 0");
    const SelectjitCond *nulls[3] = {&c[0], NULL, &c[2]};
    CHECK(selectjit_select_n(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, 3, nulls, vs, &xt, &ot) == SELECTJIT_ERR_NULL_POINTER,
          "nway NULL condition");
    float other[N];
    memcpy(other, x, sizeof other);
    SelectjitTensor part_v = tensor(other, sizeof other, sn, 1, NULL);
    float shifted[N + 1];
    SelectjitTensorMut so = out_tensor(shifted + 1, sizeof x, sn, 1, NULL);
    SelectjitTensor sv = tensor(shifted, sizeof x, sn, 1, NULL);
    const SelectjitTensor *ov[3] = {&zt, &sv, &st};
    CHECK(selectjit_select_n(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, 3, cs, ov, &xt, &so) == SELECTJIT_ERR_OVERLAP,
          "nway overlap");
    uint8_t m2[2] = {1, 0};
    SelectjitCond bad = cond_of(SELECTJIT_COND_MASK, 0, 0, tensor(m2, 2, sn, 1, NULL), none);
    const SelectjitCond *bs[3] = {&c[0], &c[1], &bad};
    s = selectjit_select_n(e, SELECTJIT_DTYPE_F32, SELECTJIT_MODE_NUMPY, 3, bs, vs, &part_v, &ot);
    CHECK(s != SELECTJIT_OK, "nway short mask");
    for (int i = 0; i < N; i++) CHECK(out[i] == 123.0f, "nway error wrote element %d", i);
    CHECK(strstr(selectjit_last_error(), "condition 3") != NULL, "nway error names the condition: %s",
          selectjit_last_error());
    selectjit_engine_free(e);
}

/* Bitmap conditions (Arrow's bit-packed booleans) at a bit offset, with validity: a two-way
   select in place and a CASE WHEN, against values computed here; errors write nothing. */
static void bitmaps(int backend) {
    SelectjitEngine *e = engine(backend, 0, 0);
    enum { N = 5000, OFF = 3, VOFF = 9 };
    uint8_t bits[(N + OFF + 7) / 8], valid[(N + VOFF + 7) / 8];
    for (size_t i = 0; i < sizeof bits; i++) bits[i] = (uint8_t)(i * 37u + 11u);
    for (size_t i = 0; i < sizeof valid; i++) valid[i] = (uint8_t)(i * 91u + 5u);
    int32_t a[N], out[N], want[N], minus = -1;
    for (int i = 0; i < N; i++) {
        a[i] = i;
        int b = (bits[(i + OFF) / 8] >> ((i + OFF) % 8)) & 1;
        int v = (valid[(i + VOFF) / 8] >> ((i + VOFF) % 8)) & 1;
        want[i] = b && v ? i : -1;
        out[i] = 77;
    }
    size_t sn[1] = {N};
    SelectjitTensor none = tensor(NULL, 0, NULL, 0, NULL);
    SelectjitCond c = cond_of(SELECTJIT_COND_BITMAP, 0, 0, tensor(bits, sizeof bits, sn, 1, NULL), none);
    c.bit_offset = OFF;
    c.validity = valid;
    c.validity_len_bytes = sizeof valid;
    c.validity_offset = VOFF;
    SelectjitTensor at = tensor(a, sizeof a, sn, 1, NULL), mt = tensor(&minus, 4, NULL, 0, NULL);
    SelectjitTensorMut ot = out_tensor(out, sizeof out, sn, 1, NULL);
    int s = selectjit_select_cond(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &c, &at, &mt, &ot);
    CHECK(s == SELECTJIT_OK, "bitmap select (backend %d) -> %s", backend, selectjit_status_name(s));
    CHECK(memcmp(out, want, sizeof want) == 0, "bitmap select values (backend %d)", backend);
    /* CASE WHEN bitmap THEN a WHEN a > 2500 THEN 1 ELSE -1: the first true wins. */
    int32_t one = 1, half = 2500;
    for (int i = 0; i < N; i++) {
        out[i] = 77;
        if (want[i] == -1 && i > 2500) want[i] = 1;
    }
    SelectjitCond gt = cond_of(SELECTJIT_COND_CMP, SELECTJIT_CMP_GT, SELECTJIT_DTYPE_I32, at, tensor(&half, 4, NULL, 0, NULL));
    const SelectjitCond *cs[2] = {&c, &gt};
    SelectjitTensor onet = tensor(&one, 4, NULL, 0, NULL);
    const SelectjitTensor *vs[2] = {&at, &onet};
    s = selectjit_select_n(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, 2, cs, vs, &mt, &ot);
    CHECK(s == SELECTJIT_OK, "bitmap nway (backend %d) -> %s", backend, selectjit_status_name(s));
    CHECK(memcmp(out, want, sizeof want) == 0, "bitmap nway values (backend %d)", backend);
    /* Errors: bytes that end before the bits; a first-version struct; strides. */
    for (int i = 0; i < N; i++) out[i] = 77;
    SelectjitCond shortc = c;
    shortc.lhs.len_bytes = sizeof bits - 1;
    s = selectjit_select_cond(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &shortc, &at, &mt, &ot);
    CHECK(s != SELECTJIT_OK && strstr(selectjit_last_error(), "bitmap") != NULL, "short bitmap: %s",
          selectjit_last_error());
    SelectjitCond v1 = c;
    v1.struct_size = (uint32_t)offsetof(SelectjitCond, bit_offset);
    s = selectjit_select_cond(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &v1, &at, &mt, &ot);
    CHECK(s == SELECTJIT_ERR_INVALID, "bitmap in a first-version struct -> %s", selectjit_status_name(s));
    ptrdiff_t st1[1] = {1};
    SelectjitCond strided = c;
    strided.lhs.strides = st1;
    s = selectjit_select_cond(e, SELECTJIT_DTYPE_I32, SELECTJIT_MODE_NUMPY, -1, &strided, &at, &mt, &ot);
    CHECK(s == SELECTJIT_ERR_INVALID, "strided bitmap -> %s", selectjit_status_name(s));
    for (int i = 0; i < N; i++) CHECK(out[i] == 77, "bitmap error wrote element %d", i);
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
    options();
    stats_sizes();
    predicates(SELECTJIT_BACKEND_JIT);
    predicates(SELECTJIT_BACKEND_STATIC);
    predicates(SELECTJIT_BACKEND_INTERP);
    predicate_errors();
    prepared_predicates(SELECTJIT_BACKEND_JIT);
    prepared_predicates(SELECTJIT_BACKEND_STATIC);
    prepared_predicates(SELECTJIT_BACKEND_INTERP);
    prepared_predicate_errors();
    nway(SELECTJIT_BACKEND_JIT);
    nway(SELECTJIT_BACKEND_STATIC);
    nway(SELECTJIT_BACKEND_INTERP);
    bitmaps(SELECTJIT_BACKEND_JIT);
    bitmaps(SELECTJIT_BACKEND_STATIC);
    bitmaps(SELECTJIT_BACKEND_INTERP);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
