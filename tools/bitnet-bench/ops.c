/*
 * ops.c - the list of benchmarked ops, in the order they are run.  Each
 * bench_op lives in its own op_*.c; the references are weak, so an op whose
 * file is absent from the build drops out (an op is added to the tool when
 * the library call it times exists).
 */
#include "bench.h"

#include <string.h>

#define BENCH_OPS(X) \
    X(copy) X(transfer) X(quantize_weights) X(quantize_acts) X(dequantize_weights) X(t3_unpack) \
    X(bitlinear) X(ffn) X(mlp) X(matmul_f32) X(add) X(gelu) X(softmax) X(sum) X(layernorm) X(permute) X(file) \
    X(cholesky) X(qr) X(svd)

#define DECLARE(x) extern const bench_op bench_op_##x __attribute__((weak));
BENCH_OPS(DECLARE)
#undef DECLARE

#define ENTRY(x) &bench_op_##x,
static const bench_op *const all_ops[] = {BENCH_OPS(ENTRY)};
#undef ENTRY

size_t bench_op_all(const bench_op **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof all_ops / sizeof all_ops[0]; i++)
        if (all_ops[i] && n < max) out[n++] = all_ops[i];
    return n;
}

const bench_op *bench_op_find(const char *name)
{
    for (size_t i = 0; i < sizeof all_ops / sizeof all_ops[0]; i++) {
        const bench_op *op = all_ops[i];
        if (op && (strcmp(op->name, name) == 0 || (op->alias && strcmp(op->alias, name) == 0))) return op;
    }
    return NULL;
}
