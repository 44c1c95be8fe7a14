// The int8 kernels of int8.cpp for AVX2 + FMA CPUs (no AVX-512, no VNNI), same functions, same contracts, built with
// their own flags by sbert_qdrant/encoder/int8/build.py and chosen at load by native.py.
//
// sbq_int8_attention: q and k are taken to s16 (u8 - 128) and multiplied by vpmaddwd, s16 x s16 pair sums into s32:
// exact, where vpmaddubsw's s16 pair sums of u8 x s8 would saturate. Keys go 8 to a register as pairs of columns
// ([key block][column pair][8 keys][2]); softmax's u8 probabilities (same rounding and dither as int8.cpp) times s8
// values go likewise as pairs of keys ([key pair][column][2]). Returns 0, or 1 for a head size it does not handle.
// sbq_quantize_rows and sbq_add_layer_norm: 8 floats at a time, the tail of a row in scalar code.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdlib.h>

#include "dither.h"

// e^x as 2^n * 2^f (n = round(x log2 e), |f| <= 1/2, 2^f by a degree-6 polynomial), x clamped to >= -87
static inline __m256 exp256(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(1.4426950408889634f));
    __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_sub_ps(t, n);
    __m256 p = _mm256_set1_ps(1.535336188319500e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.339887440266574e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618437357674640e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550332471162809e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402264791363012e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931472028550421e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float hmax256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static inline int32_t hsum256_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// 8 s32 already in 0..255 stored as 8 bytes
static inline void store8_u8(uint8_t* dst, __m256i v) {
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i b = _mm256_shuffle_epi8(v, pick);
    _mm_storel_epi64((__m128i*)dst, _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
}

static inline __m256i clamp_u8(__m256i v) {
    return _mm256_max_epi32(_mm256_min_epi32(v, _mm256_set1_epi32(255)), _mm256_setzero_si256());
}

#define R 4  // query rows per tile: 4 independent dot-product chains share each K and V load

static inline int32_t pair16(int32_t lo, int32_t hi) { return (int32_t)((uint32_t)(uint16_t)lo | ((uint32_t)(uint16_t)hi << 16)); }

extern "C" int sbq_int8_attention(
    const uint8_t* q, const uint8_t* k, const uint8_t* v, int64_t ld,
    const uint8_t* key_valid,
    int64_t B, int64_t L, int64_t H, int64_t D,
    float qk_scale, float v_scale, const float* out_mult, float out_offset,
    uint8_t* out, int64_t out_ld, int64_t bh_start, int64_t bh_end) {
    if (D % 16 != 0 || D > 256) return 1;  // qp below holds 128 column pairs
    const int64_t Lp = (L + 7) / 8 * 8, NB = Lp / 8, P = D / 2, DB = D / 8;
    int16_t* kp = (int16_t*)aligned_alloc(32, Lp * D * 2 + 64);     // [jb][p][8][2]
    int16_t* vp = (int16_t*)aligned_alloc(32, Lp * D * 2 + 64);     // [jp][d][2]
    int32_t* okm = (int32_t*)aligned_alloc(32, Lp * 4 + 64);        // -1 for a valid key, else 0
    float* srow = (float*)aligned_alloc(32, R * Lp * 4 + 64);
    int32_t* ppair = (int32_t*)aligned_alloc(32, R * (Lp / 2) * 4 + 64);
    uint8_t* prow = (uint8_t*)aligned_alloc(32, Lp + 64);
    float* dither = sbq_dither_table(Lp, 32);
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
            for (int64_t j = 0; j < Lp; ++j) okm[j] = (j < L && valid[j]) ? -1 : 0;
            last_b = b;
        }
        for (int64_t j = 0; j < Lp; ++j) {  // K as s16, pairs of columns 8 keys to a register
            int16_t* dst = kp + (j / 8) * P * 16 + (j % 8) * 2;
            const uint8_t* kr = kb + j * ld;
            for (int64_t p = 0; p < P; ++p) {
                dst[p * 16] = j < L ? (int16_t)kr[2 * p] - 128 : 0;
                dst[p * 16 + 1] = j < L ? (int16_t)kr[2 * p + 1] - 128 : 0;
            }
        }
        for (int64_t j = 0; j < Lp; ++j) {  // V as s16, pairs of keys per column
            int16_t* dst = vp + (j / 2) * D * 2 + (j % 2);
            const uint8_t* vr = vb + j * ld;
            for (int64_t d = 0; d < D; ++d) dst[d * 2] = j < L ? (int16_t)vr[d] - 128 : 0;
        }
        const __m256 scale = _mm256_set1_ps(qk_scale), ninf = _mm256_set1_ps(-INFINITY);
        int64_t rows_used = L;  // rows after the last real token are padding: not computed
        while (rows_used > 0 && !valid[rows_used - 1]) --rows_used;
        for (int64_t i0 = 0; i0 < rows_used; i0 += R) {
            const int rows = (int)((rows_used - i0) < R ? (rows_used - i0) : R);
            int32_t qp[R][128];
            for (int r = 0; r < R; ++r) {
                const uint8_t* qr = qb + (i0 + (r < rows ? r : 0)) * ld;
                for (int64_t p = 0; p < P; ++p) qp[r][p] = pair16((int32_t)qr[2 * p] - 128, (int32_t)qr[2 * p + 1] - 128);
            }
            __m256 mx[R];
            for (int r = 0; r < R; ++r) mx[r] = ninf;
            for (int64_t jb = 0; jb < NB; ++jb) {
                __m256i acc[R];
                for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
                const int16_t* kk = kp + jb * P * 16;
                for (int64_t p = 0; p < P; ++p) {
                    __m256i kv = _mm256_load_si256((const __m256i*)(kk + p * 16));
                    for (int r = 0; r < R; ++r)
                        acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_set1_epi32(qp[r][p]), kv));
                }
                __m256 ok = _mm256_castsi256_ps(_mm256_load_si256((const __m256i*)(okm + jb * 8)));
                for (int r = 0; r < R; ++r) {
                    __m256 s = _mm256_blendv_ps(ninf, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r]), scale), ok);
                    _mm256_store_ps(srow + r * Lp + jb * 8, s);
                    mx[r] = _mm256_max_ps(mx[r], s);
                }
            }
            float inv[R];
            for (int r = 0; r < R; ++r) {
                const __m256 m = _mm256_set1_ps(hmax256(mx[r]));
                const float* row_dither = dither + ((i0 + r) % DITHER_ROWS) * Lp;
                __m256i total = _mm256_setzero_si256();
                for (int64_t jb = 0; jb < NB; ++jb) {
                    __m256 x = _mm256_mul_ps(exp256(_mm256_sub_ps(_mm256_load_ps(srow + r * Lp + jb * 8), m)),
                                             _mm256_set1_ps(255.f));
                    __m256 d = _mm256_blendv_ps(_mm256_set1_ps(0.5f), _mm256_load_ps(row_dither + jb * 8),
                                                _mm256_cmp_ps(x, _mm256_set1_ps(1.f), _CMP_LT_OQ));
                    __m256i pi = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_floor_ps(_mm256_add_ps(x, d))),
                                                  _mm256_set1_epi32(255));
                    total = _mm256_add_epi32(total, pi);
                    store8_u8(prow + jb * 8, pi);
                }
                for (int64_t jp = 0; jp < Lp / 2; ++jp) ppair[r * (Lp / 2) + jp] = pair16(prow[2 * jp], prow[2 * jp + 1]);
                inv[r] = v_scale / (float)hsum256_epi32(total);
            }
            for (int64_t db = 0; db < DB; ++db) {
                __m256i acc[R];
                for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
                for (int64_t jp = 0; jp < Lp / 2; ++jp) {
                    __m256i vv = _mm256_load_si256((const __m256i*)(vp + (jp * D + db * 8) * 2));
                    for (int r = 0; r < R; ++r)
                        acc[r] = _mm256_add_epi32(
                            acc[r], _mm256_madd_epi16(_mm256_set1_epi32(ppair[r * (Lp / 2) + jp]), vv));
                }
                const __m256 mu = _mm256_loadu_ps(mult + db * 8);
                for (int r = 0; r < rows; ++r) {
                    __m256 ctx = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r]), _mm256_set1_ps(inv[r]));
                    __m256i yi = _mm256_cvtps_epi32(_mm256_fmadd_ps(ctx, mu, _mm256_set1_ps(out_offset)));
                    store8_u8(ob + (i0 + r) * out_ld + db * 8, clamp_u8(yi));
                }
            }
        }
        // padded query rows: the zero point (no real token reads them)
        for (int64_t i = 0; i < L; ++i) if (!valid[i]) memset(ob + i * out_ld, zero_out, D);
    }
    free(kp); free(vp); free(okm); free(srow); free(ppair); free(prow); free(dither);
    return 0;
}

static inline float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// Rows row_start..row_end of x (fp32, or bf16 when bf16 != 0; [rows, width], contiguous) quantized to u8:
// clamp(round(x * mult[column] + offset), 0, 255), rounding half to even like torch.round.
extern "C" void sbq_quantize_rows(
    const void* x, int64_t bf16, int64_t width, const float* mult, float offset, uint8_t* out,
    int64_t row_start, int64_t row_end) {
    const __m256 off = _mm256_set1_ps(offset);
    const int64_t body = width / 8 * 8;
    for (int64_t r = row_start; r < row_end; ++r) {
        for (int64_t c = 0; c < body; c += 8) {
            __m256 v;
            if (bf16) {
                __m128i h = _mm_loadu_si128((const __m128i*)((const uint16_t*)x + r * width + c));
                v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
            } else {
                v = _mm256_loadu_ps((const float*)x + r * width + c);
            }
            store8_u8(out + r * width + c, clamp_u8(_mm256_cvtps_epi32(_mm256_fmadd_ps(v, _mm256_loadu_ps(mult + c), off))));
        }
        for (int64_t c = body; c < width; ++c) {
            float v = bf16 ? bf16_to_float(((const uint16_t*)x)[r * width + c]) : ((const float*)x)[r * width + c];
            out[r * width + c] = (uint8_t)fminf(255.f, fmaxf(0.f, nearbyintf(fmaf(v, mult[c], offset))));
        }
    }
}

// Rows row_start..row_end of LayerNorm(a + b) over the last dimension (fp32, [rows, width], contiguous): the residual
// add and the normalization in one pass over memory (each row is re-read from L1).
extern "C" void sbq_add_layer_norm(
    const float* a, const float* b, const float* gamma, const float* beta, float eps, float* out, int64_t width,
    int64_t row_start, int64_t row_end) {
    const int64_t body = width / 8 * 8;
    for (int64_t r = row_start; r < row_end; ++r) {
        const float* ar = a + r * width; const float* br = b + r * width; float* orow = out + r * width;
        __m256 sum = _mm256_setzero_ps();
        float tail = 0.f;
        for (int64_t c = 0; c < body; c += 8) {
            __m256 x = _mm256_add_ps(_mm256_loadu_ps(ar + c), _mm256_loadu_ps(br + c));
            _mm256_storeu_ps(orow + c, x);
            sum = _mm256_add_ps(sum, x);
        }
        for (int64_t c = body; c < width; ++c) { orow[c] = ar[c] + br[c]; tail += orow[c]; }
        const float mean = (hsum256(sum) + tail) / (float)width;
        const __m256 mu = _mm256_set1_ps(mean);
        __m256 sq = _mm256_setzero_ps();
        float tail_sq = 0.f;
        for (int64_t c = 0; c < body; c += 8) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(orow + c), mu);
            sq = _mm256_fmadd_ps(d, d, sq);
        }
        for (int64_t c = body; c < width; ++c) { float d = orow[c] - mean; tail_sq += d * d; }
        const float rstd = 1.0f / sqrtf((hsum256(sq) + tail_sq) / (float)width + eps);
        const __m256 rs = _mm256_set1_ps(rstd);
        for (int64_t c = 0; c < body; c += 8) {
            __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(orow + c), mu), rs);
            _mm256_storeu_ps(orow + c, _mm256_fmadd_ps(d, _mm256_loadu_ps(gamma + c), _mm256_loadu_ps(beta + c)));
        }
        for (int64_t c = body; c < width; ++c) orow[c] = (orow[c] - mean) * rstd * gamma[c] + beta[c];
    }
}

// The int8 GEMMs of StaticInt8Linear on AVX2 (faster than oneDNN's there: benchmarks/int8_kernels.py), s8 weights
// times u8 activations, or s16 ones (16-bit activations for the Linears int8 activations cost too much accuracy).
// u8: weights packed once as [N / 16][K / 4][16 columns][4 k]; a row's 4 bytes at k..k+3 are broadcast to 8 lanes,
// vpmaddubsw multiplies them by 8 columns' 4 weights and adds the pairs (2k, 2k + 1) in saturating s16 (the pairs
// pair_safe_levels keeps from saturating, as with oneDNN), vpmaddwd by ones adds the two pairs in s32.
// s16: weights packed as s16 [N / 16][K / 2][16 columns][2 k]; vpmaddwd adds a row's products of channels 2k and 2k + 1
// exactly in s32 (the caller keeps K x the largest code x 127 below 2^31). Same multiplies per cycle, twice the bytes.
// A tile is 4 rows x 16 columns (8 accumulators); rows go 64 at a time through every column panel, whose s32 sums then
// go through the epilogue together.
#define GEMM_ROWS 4
#define GEMM_COLUMNS 16
#define GEMM_ROW_BLOCK 64

extern "C" void sbq_pack_u8s8_weights(const int8_t* w, int64_t N, int64_t K, int8_t* packed) {
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
            packed[((n / GEMM_COLUMNS * (K / 4) + k / 4) * GEMM_COLUMNS + n % GEMM_COLUMNS) * 4 + k % 4] = w[n * K + k];
}

extern "C" void sbq_pack_s16s8_weights(const int8_t* w, int64_t N, int64_t K, int16_t* packed) {
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
            packed[((n / GEMM_COLUMNS * (K / 2) + k / 2) * GEMM_COLUMNS + n % GEMM_COLUMNS) * 2 + k % 2] = w[n * K + k];
}

// erf(x) by Abramowitz and Stegun 7.1.28: 1 - 1 / (1 + a1 x + ... + a6 x^6)^16 for x >= 0 (absolute error <= 3e-7),
// odd: no exponential, one division
static inline __m256 erf256(__m256 x) {
    const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    // |x| <= 5, where erf is 1 in fp32: larger ones would take r^16 into denormals, which x86 computes slowly
    const __m256 ax = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(5.0f));
    __m256 p = _mm256_set1_ps(0.0000430638f);
    p = _mm256_fmadd_ps(p, ax, _mm256_set1_ps(0.0002765672f));
    p = _mm256_fmadd_ps(p, ax, _mm256_set1_ps(0.0001520143f));
    p = _mm256_fmadd_ps(p, ax, _mm256_set1_ps(0.0092705272f));
    p = _mm256_fmadd_ps(p, ax, _mm256_set1_ps(0.0422820123f));
    p = _mm256_fmadd_ps(p, ax, _mm256_set1_ps(0.0705230784f));
    p = _mm256_fmadd_ps(p, ax, _mm256_set1_ps(1.0f));
    __m256 r = _mm256_div_ps(_mm256_set1_ps(1.0f), p);
    r = _mm256_mul_ps(r, r);  // ^2
    r = _mm256_mul_ps(r, r);  // ^4
    r = _mm256_mul_ps(r, r);  // ^8
    r = _mm256_mul_ps(r, r);  // ^16
    return _mm256_or_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), r), sign);
}

// What the GEMM does with a sum: y = (sum + col_offset) x col_scale + bias, the exact GELU if asked, then written as
// fp32, or as u8 clamp(round(y * out_mult + out_offset), 0, 255), or as s16 clamp(round(y * out_mult), +-out_limit).
enum GemmOutput { GEMM_FP32 = 0, GEMM_U8 = 1, GEMM_S16 = 2 };

struct GemmEpilogue {
    const int32_t* col_offset;  // -(activation zero point) x the column's weight sum
    const float* col_scale;     // activation scale x the column's weight scale
    const float* bias;          // or NULL
    int64_t gelu;
    int64_t kind;               // GemmOutput
    const float* out_mult;      // per column (u8 and s16)
    float out_offset;           // u8
    float out_limit;            // s16
    void* out;
    int64_t ldo;
};

// The s32 sums of MR rows from m x the 16 columns of panel, into sums (rows 16 apart). Input is uint8_t (u8) or
// int16_t (s16): one 4-byte broadcast covers 4 or 2 channels.
template <int MR, typename Input>
static inline __attribute__((always_inline)) void gemm_tile(const Input* a, int64_t lda, const void* panel,
                                                            int64_t steps, int64_t m, int32_t* sums) {
    constexpr int64_t per_step = 4 / sizeof(Input);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const Input* rows = a + m * lda;
    const uint8_t* weights = (const uint8_t*)panel;
#pragma GCC unroll 2
    for (int64_t q = 0; q < steps; ++q) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i*)(weights + q * 64));
        const __m256i w1 = _mm256_loadu_si256((const __m256i*)(weights + q * 64 + 32));
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
            int32_t four;
            memcpy(&four, rows + r * lda + q * per_step, 4);
            const __m256i x = _mm256_set1_epi32(four);
            if (sizeof(Input) == 1) {
                acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(x, w0), ones));
                acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(x, w1), ones));
            } else {
                acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(x, w0));
                acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(x, w1));
            }
        }
    }
    for (int r = 0; r < MR; ++r) {
        _mm256_store_si256((__m256i*)(sums + r * GEMM_COLUMNS), acc[r][0]);
        _mm256_store_si256((__m256i*)(sums + r * GEMM_COLUMNS + 8), acc[r][1]);
    }
}

// The epilogue of rows m..m + count x columns n..n + 16 from their s32 sums: one pass over many independent values
// (GELU's chain is long; run per tile it stalled the GEMM). A row's 16 codes are packed with saturation (u8: 0..255)
// and stored at once.
static inline void gemm_epilogue(const int32_t* sums, int64_t count, int64_t m, int64_t n, const GemmEpilogue& e) {
    __m256i offset[2];
    __m256 scale[2], bias[2], mult[2];
    for (int h = 0; h < 2; ++h) {
        offset[h] = _mm256_loadu_si256((const __m256i*)(e.col_offset + n + h * 8));
        scale[h] = _mm256_loadu_ps(e.col_scale + n + h * 8);
        bias[h] = e.bias ? _mm256_loadu_ps(e.bias + n + h * 8) : _mm256_setzero_ps();
        mult[h] = e.kind != GEMM_FP32 ? _mm256_loadu_ps(e.out_mult + n + h * 8) : _mm256_setzero_ps();
    }
    const __m256 out_offset = _mm256_set1_ps(e.out_offset);
    const __m256i limit = _mm256_set1_epi32((int32_t)e.out_limit), negative_limit = _mm256_set1_epi32(-(int32_t)e.out_limit);
    for (int64_t r = 0; r < count; ++r) {
        __m256 y[2];
        for (int h = 0; h < 2; ++h) {
            const __m256i acc = _mm256_load_si256((const __m256i*)(sums + r * GEMM_COLUMNS + h * 8));
            y[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(acc, offset[h])), scale[h], bias[h]);
            if (e.gelu)
                y[h] = _mm256_mul_ps(_mm256_mul_ps(y[h], _mm256_set1_ps(0.5f)),
                                     _mm256_add_ps(_mm256_set1_ps(1.0f), erf256(_mm256_mul_ps(y[h], _mm256_set1_ps(0.70710678118654752f)))));
        }
        if (e.kind == GEMM_FP32) {
            _mm256_storeu_ps((float*)e.out + (m + r) * e.ldo + n, y[0]);
            _mm256_storeu_ps((float*)e.out + (m + r) * e.ldo + n + 8, y[1]);
        } else if (e.kind == GEMM_U8) {
            const __m256i c0 = _mm256_cvtps_epi32(_mm256_fmadd_ps(y[0], mult[0], out_offset));
            const __m256i c1 = _mm256_cvtps_epi32(_mm256_fmadd_ps(y[1], mult[1], out_offset));
            const __m256i words = _mm256_packs_epi32(c0, c1);  // u8 below, 4 to a dword: c0 0-3, c1 0-3 (twice), c0 4-7, ...
            const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(words, words),
                                                              _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
            _mm_storeu_si128((__m128i*)((uint8_t*)e.out + (m + r) * e.ldo + n), _mm256_castsi256_si128(bytes));
        } else {
            __m256i c[2];
            for (int h = 0; h < 2; ++h)
                c[h] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(y[h], mult[h])), limit), negative_limit);
            const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(c[0], c[1]), 0xD8);
            _mm256_storeu_si256((__m256i*)((int16_t*)e.out + (m + r) * e.ldo + n), words);
        }
    }
}

template <typename Input>
static void gemm(const Input* a, int64_t lda, const void* packed, int64_t N, int64_t K, const GemmEpilogue& e,
                 int64_t m_start, int64_t m_end) {
    const int64_t steps = K * sizeof(Input) / 4;
    alignas(32) int32_t sums[GEMM_ROW_BLOCK * GEMM_COLUMNS];
    for (int64_t block = m_start; block < m_end; block += GEMM_ROW_BLOCK) {
        const int64_t block_end = block + GEMM_ROW_BLOCK < m_end ? block + GEMM_ROW_BLOCK : m_end;
        for (int64_t n = 0; n < N; n += GEMM_COLUMNS) {
            const void* panel = (const uint8_t*)packed + n * K * sizeof(Input);
            int64_t m = block;
            for (; m + GEMM_ROWS <= block_end; m += GEMM_ROWS)
                gemm_tile<GEMM_ROWS>(a, lda, panel, steps, m, sums + (m - block) * GEMM_COLUMNS);
            int32_t* rest = sums + (m - block) * GEMM_COLUMNS;
            switch (block_end - m) {
                case 3: gemm_tile<3>(a, lda, panel, steps, m, rest); break;
                case 2: gemm_tile<2>(a, lda, panel, steps, m, rest); break;
                case 1: gemm_tile<1>(a, lda, panel, steps, m, rest); break;
            }
            gemm_epilogue(sums, block_end - block, block, n, e);
        }
    }
}

// Rows m_start..m_end of the GEMM of activations a ([M, K], lda apart: u8 when wide == 0, else s16) by weights packed
// by sbq_pack_u8s8_weights or sbq_pack_s16s8_weights (N a multiple of 16, K of 4), through the epilogue above.
extern "C" void sbq_gemm_s8(
    const void* a, int64_t wide, int64_t lda, const void* packed, int64_t N, int64_t K,
    const int32_t* col_offset, const float* col_scale, const float* bias, int64_t gelu,
    int64_t kind, const float* out_mult, float out_offset, float out_limit, void* out, int64_t ldo,
    int64_t m_start, int64_t m_end) {
    const GemmEpilogue e = {col_offset, col_scale, bias, gelu, kind, out_mult, out_offset, out_limit, out, ldo};
    if (wide)
        gemm((const int16_t*)a, lda, packed, N, K, e, m_start, m_end);
    else
        gemm((const uint8_t*)a, lda, packed, N, K, e, m_start, m_end);
}
