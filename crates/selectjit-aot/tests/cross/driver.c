/* Runs the kernels of an exported selectjit table on the cases of a file and compares every
 * output byte with the expected bytes (computed by the reference interpreter on the machine that
 * exported the table). Built for the table's architecture and run natively or under qemu.
 *
 * Usage: driver CASES_FILE
 *
 * Case file (all integers little-endian, whatever the machine running this):
 *   "SJXCASE2", u32 case count, then per case:
 *   u32 kind (0 exact, 1 generic), u32 key_len, key bytes,
 *   u32 rank, u64 dims[rank], i64 byte_strides[5 * rank]   (cond, then, else, out, rhs; passed
 *   to generic kernels only),
 *   u32 in_place (bits: 1 then is the output, 2 else is, 4 cond (a predicate's lhs) is, 8 rhs is),
 *   u32 split count n, u64 split[n]   (calls cover [0,split[0]), [split[0],split[1]), ..., [split[n-1],dims[0])),
 *   u64 len[5] (bytes of cond, then, else, out, rhs; rhs is empty for masks and tests: NULL is
 *   passed), u64 base[5] (byte offset of each operand's base element in its buffer), then the
 *   bytes of cond, then, else, the initial output, rhs, and the expected output.
 * Then the single-pass n-way cases: "SJXNWAY1", u32 case count, then per case:
 *   u32 key_len, key bytes (of an entry of kind SELECTJIT_AOT_NWAY), u64 n (output elements),
 *   u32 width (bytes per output element), u32 operand count m, per operand u64 len (its bytes)
 *   and u32 in_place (1: the operand is the output itself, len 0), u32 split count, u64 splits
 *   (as above, ending at n), then each operand's bytes, the initial output (n * width bytes) and
 *   the expected output.
 * Every output buffer has guard bytes on both sides that must stay untouched.
 *
 * Prints one line per failing case and ends with "N passed, M failed". Exits 0 only when every
 * case passed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define GUARD 64
#define GUARD_BYTE 0xa5

static const uint8_t *cur, *end_of_file;
static int truncated = 0;

static const uint8_t *take(size_t n) {
    if ((size_t)(end_of_file - cur) < n) {
        truncated = 1;
        return NULL;
    }
    const uint8_t *p = cur;
    cur += n;
    return p;
}

static uint64_t le(size_t n) {
    const uint8_t *p = take(n);
    uint64_t v = 0;
    if (!p) return 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static const SelectjitAotEntry *find(const SelectjitAotTable *t, uint32_t kind, const uint8_t *key,
                                     uint32_t key_len) {
    for (uint32_t i = 0; i < t->entry_count; i++) {
        const SelectjitAotEntry *e = &t->entries[i];
        if (e->kind == kind && e->key_len == key_len && memcmp(t->keys + e->key_offset, key, key_len) == 0)
            return e;
    }
    return NULL;
}

static const char *expected_arch(void) {
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__aarch64__)
    return "aarch64";
#elif defined(__s390x__)
    return "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
    return "riscv64";
#else
    return "unknown";
#endif
}

int main(int argc, char **argv) {
    const SelectjitAotTable *t = &selectjit_aot_table;
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES_FILE\n", argv[0]);
        return 2;
    }
    if (memcmp(t->magic, "SJITAOT", 8) != 0 || t->version != SELECTJIT_AOT_VERSION) {
        fprintf(stderr, "bad table header (magic or version %u)\n", t->version);
        return 2;
    }
    if (strncmp(t->triple, expected_arch(), strlen(expected_arch())) != 0) {
        fprintf(stderr, "table for %s run on %s\n", t->triple, expected_arch());
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *file = malloc((size_t)size);
    if (!file || fread(file, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    fclose(f);
    cur = file;
    end_of_file = file + size;
    const uint8_t *magic = take(8);
    if (!magic || memcmp(magic, "SJXCASE2", 8) != 0) {
        fprintf(stderr, "not a case file\n");
        return 2;
    }
    uint32_t n = (uint32_t)le(4);
    int passed = 0, failed = 0;
    uint32_t exact_runs = 0, generic_runs = 0;
    for (uint32_t c = 0; c < n && !truncated; c++) {
        uint32_t kind = (uint32_t)le(4), key_len = (uint32_t)le(4);
        const uint8_t *key = take(key_len);
        uint32_t rank = (uint32_t)le(4);
        uint64_t dims[64];
        int64_t strides[5 * 64];
        if (rank < 1 || rank > 64) {
            fprintf(stderr, "case %u: rank %u\n", c, rank);
            return 2;
        }
        for (uint32_t k = 0; k < rank; k++) dims[k] = le(8);
        for (uint32_t k = 0; k < 5 * rank; k++) strides[k] = (int64_t)le(8);
        uint32_t in_place = (uint32_t)le(4);
        uint32_t nsplit = (uint32_t)le(4);
        uint64_t split[8];
        if (nsplit > 8) {
            fprintf(stderr, "case %u: %u splits\n", c, nsplit);
            return 2;
        }
        for (uint32_t k = 0; k < nsplit; k++) split[k] = le(8);
        uint64_t len[5], base[5];
        for (int k = 0; k < 5; k++) len[k] = le(8);
        for (int k = 0; k < 5; k++) base[k] = le(8);
        const uint8_t *cond = take(len[0]), *then_ = take(len[1]), *else_ = take(len[2]);
        const uint8_t *init = take(len[3]), *rhs = take(len[4]), *want = take(len[3]);
        if (truncated) break;
        for (int k = 0; k < 5; k++) {
            if (len[k] && base[k] >= len[k]) {
                fprintf(stderr, "case %u: base %llu of operand %d outside its %llu bytes\n", c,
                        (unsigned long long)base[k], k, (unsigned long long)len[k]);
                return 2;
            }
        }
        const SelectjitAotEntry *e = find(t, kind, key, key_len);
        if (!e || !e->func) {
            printf("FAIL case %u: no %s kernel with this key in the table\n", c, kind ? "generic" : "exact");
            failed++;
            continue;
        }
        /* Inputs in buffers of their own; the output between guard bytes. */
        uint8_t *bc = malloc(len[0] + 1), *bt = malloc(len[1] + 1), *be = malloc(len[2] + 1);
        uint8_t *br = malloc(len[4] + 1);
        uint8_t *bo = malloc(len[3] + 2 * GUARD);
        memcpy(bc, cond, len[0]);
        memcpy(bt, then_, len[1]);
        memcpy(be, else_, len[2]);
        memcpy(br, rhs, len[4]);
        memset(bo, GUARD_BYTE, len[3] + 2 * GUARD);
        uint8_t *out = bo + GUARD;
        memcpy(out, init, len[3]);
        /* Base pointers; an input that is the output starts at the output's base. */
        uint8_t *po = out + base[3];
        const uint8_t *pc = (in_place & 4) ? po : bc + base[0];
        const uint8_t *pt = (in_place & 1) ? po : bt + base[1];
        const uint8_t *pe = (in_place & 2) ? po : be + base[2];
        const uint8_t *pr = (in_place & 8) ? po : len[4] ? br + base[4] : NULL;
        const uint64_t *d = kind == SELECTJIT_AOT_GENERIC ? dims : NULL;
        const int64_t *s = kind == SELECTJIT_AOT_GENERIC ? strides : NULL;
        uint64_t begin = 0;
        for (uint32_t k = 0; k <= nsplit; k++) {
            uint64_t stop = k < nsplit ? split[k] : dims[0];
            e->func(pc, pt, pe, po, (size_t)begin, (size_t)stop, d, s, pr);
            begin = stop;
        }
        int ok = memcmp(out, want, len[3]) == 0;
        for (int g = 0; g < GUARD; g++) ok &= bo[g] == GUARD_BYTE && out[len[3] + g] == GUARD_BYTE;
        if (ok) {
            passed++;
        } else {
            failed++;
            size_t at = 0;
            while (at < len[3] && out[at] == want[at]) at++;
            printf("FAIL case %u (%s kernel, rank %u, dims[0] %llu): first wrong byte at %zu of %llu\n", c,
                   kind ? "generic" : "exact", rank, (unsigned long long)dims[0], at,
                   (unsigned long long)len[3]);
        }
        if (kind == SELECTJIT_AOT_GENERIC)
            generic_runs++;
        else
            exact_runs++;
        free(bc);
        free(bt);
        free(be);
        free(br);
        free(bo);
    }
    uint32_t nway_runs = 0;
    const uint8_t *nway_magic = truncated || cur == end_of_file ? NULL : take(8);
    if (nway_magic && memcmp(nway_magic, "SJXNWAY1", 8) != 0) {
        fprintf(stderr, "bad n-way section\n");
        return 2;
    }
    uint32_t nn = nway_magic ? (uint32_t)le(4) : 0;
    for (uint32_t c = 0; c < nn && !truncated; c++) {
        uint32_t key_len = (uint32_t)le(4);
        const uint8_t *key = take(key_len);
        uint64_t len = le(8);
        uint32_t width = (uint32_t)le(4), m = (uint32_t)le(4);
        uint64_t op_len[64];
        uint32_t op_out[64];
        if (m < 2 || m > 64 || width < 1 || width > 16) {
            fprintf(stderr, "n-way case %u: %u operands of width %u\n", c, m, width);
            return 2;
        }
        for (uint32_t j = 0; j < m; j++) {
            op_len[j] = le(8);
            op_out[j] = (uint32_t)le(4);
        }
        uint32_t nsplit = (uint32_t)le(4);
        uint64_t split[8];
        if (nsplit > 8) {
            fprintf(stderr, "n-way case %u: %u splits\n", c, nsplit);
            return 2;
        }
        for (uint32_t k = 0; k < nsplit; k++) split[k] = le(8);
        const uint8_t *op_bytes[64];
        for (uint32_t j = 0; j < m; j++) op_bytes[j] = take(op_len[j]);
        size_t out_bytes = (size_t)len * width;
        const uint8_t *init = take(out_bytes), *want = take(out_bytes);
        if (truncated) break;
        const SelectjitAotEntry *e = find(t, SELECTJIT_AOT_NWAY, key, key_len);
        if (!e || !e->func) {
            printf("FAIL n-way case %u: no n-way kernel with this key in the table\n", c);
            failed++;
            continue;
        }
        SelectjitNwayFn f = (SelectjitNwayFn)(void (*)(void))e->func;
        /* Each operand in a buffer of its own; the output between guard bytes. */
        uint8_t *bufs[64];
        const uint8_t *ptrs[64];
        uint8_t *bo = malloc(out_bytes + 2 * GUARD);
        memset(bo, GUARD_BYTE, out_bytes + 2 * GUARD);
        uint8_t *out = bo + GUARD;
        memcpy(out, init, out_bytes);
        for (uint32_t j = 0; j < m; j++) {
            bufs[j] = malloc(op_len[j] + 1);
            memcpy(bufs[j], op_bytes[j], op_len[j]);
            ptrs[j] = op_out[j] ? out : bufs[j];
        }
        uint64_t begin = 0;
        for (uint32_t k = 0; k <= nsplit; k++) {
            uint64_t stop = k < nsplit ? split[k] : len;
            f(ptrs, out, (size_t)begin, (size_t)stop);
            begin = stop;
        }
        int ok = memcmp(out, want, out_bytes) == 0;
        for (int g = 0; g < GUARD; g++) ok &= bo[g] == GUARD_BYTE && out[out_bytes + g] == GUARD_BYTE;
        if (ok) {
            passed++;
        } else {
            failed++;
            size_t at = 0;
            while (at < out_bytes && out[at] == want[at]) at++;
            printf("FAIL n-way case %u (%u operands, %llu elements of %u bytes): first wrong byte at %zu\n", c, m,
                   (unsigned long long)len, width, at);
        }
        nway_runs++;
        for (uint32_t j = 0; j < m; j++) free(bufs[j]);
        free(bo);
    }
    if (truncated) {
        fprintf(stderr, "case file truncated\n");
        return 2;
    }
    printf("table %s [%s]: %u kernels; %u exact, %u generic and %u n-way kernel runs\n", t->triple,
           t->features, t->entry_count, exact_runs, generic_runs, nway_runs);
    printf("%d passed, %d failed\n", passed, failed);
    free(file);
    return failed ? 1 : 0;
}
