/*
 * reduce.h - the SIMD inner loops of the CPU reductions over a leading
 * axis (lib/cpu/reduce_avx2.c, reduce_avx512.c), called from reduce.c when
 * the CPU has the instructions: input rows of w floats into w running
 * column results.
 */
#ifndef BITNET_CPU_REDUCE_H
#define BITNET_CPU_REDUCE_H

#include <stdint.h>

/* acc[c] += x[l * stride + c] for l < rows, c < w, in double, rows taken
 * four at a time as acc + ((x0 + x1) + (x2 + x3)) (a fixed order). */
void bn_colsum_rows_avx2(double *acc, const float *x, uint64_t stride, uint64_t rows, uint64_t w);
void bn_colsum_rows_avx512(double *acc, const float *x, uint64_t stride, uint64_t rows, uint64_t w);
/* For c < w: when x[c] beats m[c] (is_min: smaller, else larger; a NaN beats
 * any number, never another NaN), m[c] = x[c] and mi[c] = l. */
void bn_colbest_row_avx512(int is_min, float *m, int64_t *mi, const float *x, uint64_t w, int64_t l);

#endif
