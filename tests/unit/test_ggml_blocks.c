/* test_ggml_blocks.c — the reference decoders of the GGUF block types (kernels/ggml_blocks.h, rows of the weight-type
 * table) against gguf-py's numpy dequantisers: tests/data/kquant/NAME.bin holds random valid blocks and the floats
 * gguf.quants.dequantize made of them (tools/kquant_refs.py says how). The agreement is bit for bit (every value,
 * every type: both compute the same fp32 operations in the same order), and the fixture's header must match the
 * table's ggml number and block geometry. Plus hand-made blocks whose values are known by construction. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/ggml_blocks.h"
#include "kernels/types.h"

static uint32_t u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The whole file at path, malloc'ed; *len its size. */
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open (run from the repository root)", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    uint8_t *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void check_type(tg_dtype type) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    char path[128];
    snprintf(path, sizeof path, "tests/data/kquant/%s.bin", wt->name);
    size_t len;
    uint8_t *buf = slurp(path, &len);
    assert_true(len >= 20 && memcmp(buf, "TGKQ", 4) == 0);
    const uint32_t ggml = u32le(buf + 4), nblocks = u32le(buf + 8), elems = u32le(buf + 12), bytes = u32le(buf + 16);
    assert_int_equal(ggml, wt->ggml_type);
    assert_int_equal(elems, wt->block_elems);
    assert_int_equal(bytes, wt->block_bytes);
    assert_true(nblocks >= 64);
    const size_t n = (size_t)nblocks * elems;
    assert_int_equal(len, 20 + (size_t)nblocks * bytes + n * 4);
    const uint8_t *blocks = buf + 20, *want = blocks + (size_t)nblocks * bytes;
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    /* the whole run at once, and block by block at an odd address (the decoders take any alignment) */
    wt->decode_row(blocks, got, (int64_t)n);
    uint8_t *odd = malloc(bytes + 1);
    float *one = malloc(elems * sizeof *one);
    assert_true(odd && one);
    size_t mismatches = 0;
    for (uint32_t b = 0; b < nblocks; b++) {
        memcpy(odd + 1, blocks + (size_t)b * bytes, bytes);
        wt->decode_row(odd + 1, one, elems);
        assert_memory_equal(one, got + (size_t)b * elems, elems * sizeof *one);
    }
    for (size_t i = 0; i < n; i++) {
        float w;
        memcpy(&w, want + 4 * i, 4);
        if (memcmp(&w, &got[i], 4) != 0 && mismatches++ < 5)
            print_message("%s element %zu: %.9g, gguf-py %.9g\n", wt->name, i, (double)got[i], (double)w);
    }
    if (mismatches) fail_msg("%s: %zu of %zu values differ from gguf-py", wt->name, mismatches, n);
    assert_int_equal(wt->first_non_finite(blocks, (int64_t)n), -1);
    free(odd);
    free(one);
    free(got);
    free(buf);
}

static void test_against_gguf_py(void **state) {
    (void)state;
    const tg_dtype types[] = {TG_DT_Q4_1, TG_DT_Q5_0, TG_DT_Q5_1, TG_DT_Q2_K,  TG_DT_Q3_K,
                              TG_DT_Q4_K, TG_DT_Q5_K, TG_DT_Q6_K, TG_DT_IQ4_NL};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_type(types[i]);
}

/* Q4_K by hand: d = 1, dmin = 0.5, sub-block j's scale j + 1 and min j (both < 16: the j < 4 / j >= 4 bit packing
 * of ggml's get_scale_min_k4 written out), every nibble of sub-block j equal to j: x = (j + 1) * j - 0.5 * j. */
static void test_q4_k_by_hand(void **state) {
    (void)state;
    uint8_t blk[TG_Q4_K_BYTES] = {0};
    const uint16_t d = 0x3c00, dmin = 0x3800;
    memcpy(blk, &d, 2);
    memcpy(blk + 2, &dmin, 2);
    uint8_t *sc = blk + 4;
    for (int j = 0; j < 4; j++) sc[j] = (uint8_t)(j + 1), sc[j + 4] = (uint8_t)j;
    for (int j = 4; j < 8; j++) sc[j + 4] = (uint8_t)((j + 1) | j << 4); /* both < 16: no high bits */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) blk[16 + 32 * c + l] = (uint8_t)((2 * c) | (2 * c + 1) << 4);
    float out[256];
    tg_dequantize_row(TG_DT_Q4_K, blk, out, 256);
    for (int e = 0; e < 256; e++) {
        const int j = e / 32;
        assert_true(out[e] == (float)((j + 1) * j) - 0.5f * (float)j);
    }
}

/* Q6_K by hand: d = 0.25, scales[k] = k - 8, every 6-bit code equal to 32 + (element's 32-group index): ql nibbles
 * and qh bit pairs laid out as ggml's dequantize_row_q6_K reads them. */
static void test_q6_k_by_hand(void **state) {
    (void)state;
    uint8_t blk[TG_Q6_K_BYTES] = {0};
    uint8_t *ql = blk, *qh = blk + 128;
    int8_t *sc = (int8_t *)(blk + 192);
    const uint16_t d = 0x3400;
    memcpy(blk + 208, &d, 2);
    for (int k = 0; k < 16; k++) sc[k] = (int8_t)(k - 8);
    for (int e = 0; e < 256; e++) {
        const int h = e / 128, s = (e % 128) / 32, l = e % 32, q = 32 + e / 32;
        ql[64 * h + 32 * (s % 2) + l] |= (uint8_t)((q & 0xF) << (4 * (s / 2)));
        qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * s));
    }
    float out[256];
    tg_dequantize_row(TG_DT_Q6_K, blk, out, 256);
    for (int e = 0; e < 256; e++) {
        const int h = e / 128, s = (e % 128) / 32, l = e % 32;
        assert_true(out[e] == 0.25f * (float)(8 * h + 2 * s + l / 16 - 8) * (float)(e / 32));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_gguf_py),
        cmocka_unit_test(test_q4_k_by_hand),
        cmocka_unit_test(test_q6_k_by_hand),
    };
    return cmocka_run_group_tests_name("ggml_blocks", tests, NULL, NULL);
}
