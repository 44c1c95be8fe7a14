// Int8 kernels for static int8 encoders on AVX512-VNNI CPUs, built on first use by sbert_qdrant/encoder/native.py.
//
// sbq_int8_attention: self-attention of an encoder's padded batch, one (batch, head) pair at a time, with u8 x s8 -> s32
// dot products (native_layers.py holds the Python side):
//   q, k, v: u8 [B, L, ld], head h in columns h*D..h*D+D, symmetric (value = scale * (u8 - 128));
//   key_valid: u8 [B, L], 1 for a real token (padded keys get no attention; padded query rows are not computed);
//   scores = (q . k) * qk_scale; softmax row-scaled to u8 (255 at the row's maximum) and renormalized by its sum,
//   rounded to nearest except below 1, where a dither (floor(p * 255 + d), d from a fixed 2-D low-discrepancy
//   sequence over (row, key)) lets the many small probabilities of a long row keep their mass instead of vanishing;
//   out: u8 [B, L, out_ld] = clamp(round(context * out_mult[column] + out_offset)), the next Linear's quantization.
//   Returns 0, or 1 for a head size it does not handle (not a multiple of 16, or over 256).
// sbq_quantize_rows: activations to u8 for the next int8 GEMM; sbq_add_layer_norm: residual add + LayerNorm.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdlib.h>

#include "dither.h"

// e^x as 2^n * 2^f (n = round(x log2 e), |f| <= 1/2, 2^f by a degree-6 polynomial): ~1e-7 relative error
static inline __m512 exp512(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.4426950408889634f);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 t = _mm512_mul_ps(x, log2e);
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

#define R 4  // query rows per tile: 4 independent dot-product chains share each K and V load

extern "C" int sbq_int8_attention(
    const uint8_t* q, const uint8_t* k, const uint8_t* v, int64_t ld,
    const uint8_t* key_valid,
    int64_t B, int64_t L, int64_t H, int64_t D,
    float qk_scale, float v_scale, const float* out_mult, float out_offset,
    uint8_t* out, int64_t out_ld, int64_t bh_start, int64_t bh_end) {
    if (D % 16 != 0 || D > 256) return 1;  // qg below holds 64 groups of 4
    const int64_t Lp = (L + 15) / 16 * 16, NB = Lp / 16, G = D / 4, DB = D / 16;
    int32_t* kp = (int32_t*)aligned_alloc(64, Lp * D + 64);   // [jb][g][16] groups of 4 s8
    int8_t* vp = (int8_t*)aligned_alloc(64, Lp * D + 64);     // [jg][D][4] s8
    int32_t* comp = (int32_t*)aligned_alloc(64, Lp * 4 + 64);
    __mmask16* okm = (__mmask16*)malloc(NB * sizeof(__mmask16));
    float* srow = (float*)aligned_alloc(64, R * Lp * 4 + 64);
    uint8_t* prow = (uint8_t*)aligned_alloc(64, R * Lp + 64);
    const __m512i ones = _mm512_set1_epi8(1);
    float* dither = sbq_dither_table(Lp, 64);
    const uint8_t zero_out = (uint8_t)fminf(255.f, fmaxf(0.f, nearbyintf(out_offset)));
    int64_t last_b = -1;
    for (int64_t bh = bh_start; bh < bh_end; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        const uint8_t* qb = q + b * L * ld + h * D;
        const uint8_t* kb = k + b * L * ld + h * D;
        const uint8_t* vb = v + b * L * ld + h * D;
        const uint8_t* valid = key_valid + b * L;
        uint8_t* ob = out + b * L * out_ld + h * D;
        const float* mult = out_mult + h * D;
        if (b != last_b) {
            for (int64_t jb = 0; jb < NB; ++jb) {
                __mmask16 m = 0;
                for (int t = 0; t < 16; ++t) { int64_t j = jb * 16 + t; if (j < L && valid[j]) m |= (__mmask16)(1u << t); }
                okm[jb] = m;
            }
            last_b = b;
        }
        // K: 4-byte groups, flipped to s8 (xor 0x80 = minus 128)
        for (int64_t j = 0; j < Lp; ++j) {
            const uint8_t* kr = kb + j * ld;
            int32_t* dst = kp + (j / 16) * G * 16 + (j % 16);
            for (int64_t g = 0; g < G; ++g) {
                int32_t w = 0;
                if (j < L) { memcpy(&w, kr + 4 * g, 4); w ^= (int32_t)0x80808080; }
                dst[g * 16] = w;
            }
        }
        for (int64_t jb = 0; jb < NB; ++jb) {  // comp[j] = 128 * sum_d k_s8[j, d] (q is u8 = q_s8 + 128)
            __m512i s = _mm512_setzero_si512();
            for (int64_t g = 0; g < G; ++g) s = _mm512_dpbusd_epi32(s, ones, _mm512_load_si512(kp + (jb * G + g) * 16));
            _mm512_store_si512(comp + jb * 16, _mm512_slli_epi32(s, 7));
        }
        // V: [jg][d][4]
        for (int64_t jg = 0; jg < Lp / 4; ++jg) {
            int8_t* dst = vp + jg * D * 4;
            for (int r = 0; r < 4; ++r) {
                int64_t j = jg * 4 + r;
                if (j < L) { const uint8_t* vr = vb + j * ld; for (int64_t d = 0; d < D; ++d) dst[d * 4 + r] = (int8_t)(vr[d] ^ 0x80); }
                else { for (int64_t d = 0; d < D; ++d) dst[d * 4 + r] = 0; }
            }
        }
        const __m512 scale = _mm512_set1_ps(qk_scale), ninf = _mm512_set1_ps(-INFINITY);
        int64_t rows_used = L;  // rows after the last real token are padding: not computed
        while (rows_used > 0 && !valid[rows_used - 1]) --rows_used;
        for (int64_t i0 = 0; i0 < rows_used; i0 += R) {
            int rows = (int)((rows_used - i0) < R ? (rows_used - i0) : R);
            // scores for R rows
            __m512 mx[R];
            for (int r = 0; r < R; ++r) mx[r] = ninf;
            int32_t qg[R][64];
            for (int r = 0; r < R; ++r) {
                const uint8_t* qr = qb + (i0 + (r < rows ? r : 0)) * ld;
                memcpy(qg[r], qr, D);
            }
            for (int64_t jb = 0; jb < NB; ++jb) {
                __m512i acc[R];
                for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
                const int32_t* kk = kp + jb * G * 16;
                for (int64_t g = 0; g < G; ++g) {
                    __m512i kv = _mm512_load_si512(kk + g * 16);
                    for (int r = 0; r < R; ++r) acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(qg[r][g]), kv);
                }
                __m512i c = _mm512_load_si512(comp + jb * 16);
                for (int r = 0; r < R; ++r) {
                    __m512 s = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r], c)), scale);
                    s = _mm512_mask_blend_ps(okm[jb], ninf, s);
                    _mm512_store_ps(srow + r * Lp + jb * 16, s);
                    mx[r] = _mm512_max_ps(mx[r], s);
                }
            }
            float inv[R];
            for (int r = 0; r < R; ++r) {
                __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx[r]));
                __m512i total = _mm512_setzero_si512();
                const float* row_dither = dither + ((i0 + r) % DITHER_ROWS) * Lp;
                for (int64_t jb = 0; jb < NB; ++jb) {
                    __m512 p = exp512(_mm512_sub_ps(_mm512_load_ps(srow + r * Lp + jb * 16), m));
                    __m512 x = _mm512_mul_ps(p, _mm512_set1_ps(255.f));
                    __m512 d = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(1.f), _CMP_LT_OQ),
                                                    _mm512_set1_ps(0.5f), _mm512_load_ps(row_dither + jb * 16));
                    __m512i pi = _mm512_cvt_roundps_epi32(
                        _mm512_add_ps(x, d), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
                    pi = _mm512_min_epi32(pi, _mm512_set1_epi32(255));
                    total = _mm512_add_epi32(total, pi);
                    _mm_store_si128((__m128i*)(prow + r * Lp + jb * 16), _mm512_cvtepi32_epi8(pi));
                }
                inv[r] = v_scale / (float)_mm512_reduce_add_epi32(total);
            }
            for (int64_t db = 0; db < DB; ++db) {
                __m512i acc[R];
                for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
                for (int64_t jg = 0; jg < Lp / 4; ++jg) {
                    __m512i vv = _mm512_load_si512(vp + (jg * D + db * 16) * 4);
                    for (int r = 0; r < R; ++r) {
                        int32_t pp; memcpy(&pp, prow + r * Lp + 4 * jg, 4);
                        acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(pp), vv);
                    }
                }
                __m512 mu = _mm512_loadu_ps(mult + db * 16);
                for (int r = 0; r < rows; ++r) {
                    __m512 ctx = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r]), _mm512_set1_ps(inv[r]));
                    __m512i yi = _mm512_cvtps_epi32(_mm512_fmadd_ps(ctx, mu, _mm512_set1_ps(out_offset)));
                    yi = _mm512_max_epi32(_mm512_min_epi32(yi, _mm512_set1_epi32(255)), _mm512_setzero_si512());
                    _mm_storeu_si128((__m128i*)(ob + (i0 + r) * out_ld + db * 16), _mm512_cvtepi32_epi8(yi));
                }
            }
        }
        // padded query rows: the zero point (no real token reads them)
        for (int64_t i = 0; i < L; ++i) if (!valid[i]) memset(ob + i * out_ld, zero_out, D);
    }
    free(kp); free(vp); free(comp); free(okm); free(srow); free(prow); free(dither);
    return 0;
}

// Rows row_start..row_end of x (fp32, or bf16 when bf16 != 0; [rows, width], contiguous) quantized to u8:
// clamp(round(x * mult[column] + offset), 0, 255), rounding half to even like torch.round.
extern "C" void sbq_quantize_rows(
    const void* x, int64_t bf16, int64_t width, const float* mult, float offset, uint8_t* out,
    int64_t row_start, int64_t row_end) {
    const __m512 off = _mm512_set1_ps(offset);
    const __m512i lo = _mm512_setzero_si512(), hi = _mm512_set1_epi32(255);
    for (int64_t r = row_start; r < row_end; ++r) {
        for (int64_t c = 0; c < width; c += 16) {
            const __mmask16 m = width - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (width - c)) - 1);
            __m512 v;
            if (bf16) {
                __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t*)x + r * width + c);
                v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            } else {
                v = _mm512_maskz_loadu_ps(m, (const float*)x + r * width + c);
            }
            __m512i q = _mm512_cvtps_epi32(_mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, mult + c), off));
            q = _mm512_max_epi32(_mm512_min_epi32(q, hi), lo);
            _mm_mask_storeu_epi8(out + r * width + c, m, _mm512_cvtepi32_epi8(q));
        }
    }
}

// Rows row_start..row_end of LayerNorm(a + b) over the last dimension (fp32, [rows, width], contiguous): the residual
// add and the normalization in one pass over memory (each row is re-read from L1).
extern "C" void sbq_add_layer_norm(
    const float* a, const float* b, const float* gamma, const float* beta, float eps, float* out, int64_t width,
    int64_t row_start, int64_t row_end) {
    for (int64_t r = row_start; r < row_end; ++r) {
        const float* ar = a + r * width; const float* br = b + r * width; float* orow = out + r * width;
        __m512 sum = _mm512_setzero_ps();
        for (int64_t c = 0; c < width; c += 16) {
            const __mmask16 m = width - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (width - c)) - 1);
            __m512 x = _mm512_add_ps(_mm512_maskz_loadu_ps(m, ar + c), _mm512_maskz_loadu_ps(m, br + c));
            _mm512_mask_storeu_ps(orow + c, m, x);
            sum = _mm512_add_ps(sum, x);
        }
        const float mean = _mm512_reduce_add_ps(sum) / (float)width;
        const __m512 mu = _mm512_set1_ps(mean);
        __m512 sq = _mm512_setzero_ps();
        for (int64_t c = 0; c < width; c += 16) {
            const __mmask16 m = width - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (width - c)) - 1);
            __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, orow + c), mu);
            sq = _mm512_fmadd_ps(d, d, sq);
        }
        const __m512 rstd = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(sq) / (float)width + eps));
        for (int64_t c = 0; c < width; c += 16) {
            const __mmask16 m = width - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (width - c)) - 1);
            __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, orow + c), mu), rstd);
            __m512 y = _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(m, gamma + c), _mm512_maskz_loadu_ps(m, beta + c));
            _mm512_mask_storeu_ps(orow + c, m, y);
        }
    }
}
