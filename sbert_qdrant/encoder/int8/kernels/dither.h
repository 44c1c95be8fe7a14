// The softmax dither shared by every build of the int8 attention kernel (int8.cpp, int8_avx2.cpp): a plastic-number
// sequence d(row, key) = frac(key * 0.75487766 + row * 0.56984029) for DITHER_ROWS rows, reused for every DITHER_ROWS
// query rows, so that each build rounds the softmax's small weights alike.
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define DITHER_ROWS 16

// A DITHER_ROWS x Lp table of the dither, `alignment`-aligned (free() it).
static inline float* sbq_dither_table(int64_t Lp, size_t alignment) {
    float* dither = (float*)aligned_alloc(alignment, DITHER_ROWS * Lp * 4 + 64);
    for (int64_t i = 0; i < DITHER_ROWS; ++i)
        for (int64_t j = 0; j < Lp; ++j) {
            double t = j * 0.7548776662466927 + i * 0.5698402909980532;
            dither[i * Lp + j] = (float)(t - floor(t));
        }
    return dither;
}
