/*
 * test_real_mlp.c - BitLinear on real trained weights: the BitNet b1.58
 * MNIST MLP of testdata/real/hep-bitnet-mnist-b158.safetensors.  Each linear
 * layer i (layers.{0,2,4,6}) is LayerNorm(layers.i.norm.weight/bias) ->
 * BitLinear (absmean per-tensor ternary weights, absmax int8 activations)
 * with layers.i.bias, relu between layers.
 *
 * Two checks against code written here from the definitions:
 *  1. the first layer exactly: activations quantized here, codes decoded
 *     here from the T2 bytes, integer sums in int64, the documented float
 *     epilogue -- the library output must match bit for bit on every device;
 *  2. the whole network against a float64 model of the same ternary weights
 *     without activation quantization.  The only difference is the int8
 *     absmax rounding of each layer's input: per element at most m/254
 *     (half a step of m/127), an RMS relative error of about
 *     1/(254 sqrt 3) ~ 0.23% times max/rms of the row (~5-8 here), so
 *     1-2% per layer, adding up over 4 layers to an RMS relative error of
 *     a few percent (measured: NMSE 9.5e-4, i.e. 3%); the logits must agree
 *     within NMSE 5e-3 (7%) and pick the same class on at least 95% of
 *     the inputs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitnet.h"

#define NLAYERS 4
#define TOKENS 64
static const int layer_ids[NLAYERS] = {0, 2, 4, 6};

typedef struct {
    bitnet_tensor w, b, nw, nb;
    uint64_t out, in;
    uint8_t *t2;
    float d;
} layer;

static layer L[NLAYERS];

static int load_model(void **state)
{
    (void)state;
    const char *dir = getenv("BITNET_TESTDATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/real/hep-bitnet-mnist-b158.safetensors", dir ? dir : "testdata");
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    bitnet_reader *r;
    if (bitnet_reader_create(&r, f, BITNET_FMT_AUTO)) return -1;
    bitnet_tensor t;
    memset(&t, 0, sizeof t);
    while (bitnet_reader_next(r, &t) == BITNET_OK) {
        int placed = 0;
        for (int i = 0; i < NLAYERS; i++) {
            char n[64];
            bitnet_tensor *slots[4] = {&L[i].w, &L[i].b, &L[i].nw, &L[i].nb};
            const char *suffix[4] = {"weight", "bias", "norm.weight", "norm.bias"};
            for (int k = 0; k < 4; k++) {
                snprintf(n, sizeof n, "layers.%d.%s", layer_ids[i], suffix[k]);
                if (strcmp(n, t.info.name) == 0 && t.info.dtype == BITNET_F32) {
                    *slots[k] = t;
                    placed = 1;
                }
            }
        }
        if (!placed) bitnet_tensor_release(&t);
        memset(&t, 0, sizeof t);
    }
    bitnet_reader_free(r);
    fclose(f);
    for (int i = 0; i < NLAYERS; i++) {
        if (!L[i].w.data || !L[i].b.data || !L[i].nw.data || !L[i].nb.data || L[i].w.info.rank != 2) return -1;
        L[i].out = L[i].w.info.dims[0];
        L[i].in = L[i].w.info.dims[1];
        L[i].t2 = malloc(bitnet_t2_row_bytes(L[i].in) * L[i].out);
        if (!L[i].t2 ||
            bitnet_quantize_weights_ref(L[i].w.data, L[i].out, L[i].in, BITNET_SCALE_TENSOR, 0, L[i].t2, &L[i].d))
            return -1;
    }
    return 0;
}

static int free_model(void **state)
{
    (void)state;
    for (int i = 0; i < NLAYERS; i++) {
        bitnet_tensor_release(&L[i].w);
        bitnet_tensor_release(&L[i].b);
        bitnet_tensor_release(&L[i].nw);
        bitnet_tensor_release(&L[i].nb);
        free(L[i].t2);
    }
    return 0;
}

/* the code of (row o, column c), from the layout of bnt(5) */
static int code_at(const layer *l, uint64_t o, uint64_t c)
{
    const uint8_t *row = l->t2 + o * bitnet_t2_row_bytes(l->in);
    return ((row[(c / 128) * 32 + c % 32] >> (2 * ((c % 128) / 32))) & 3) - 1;
}

/* MNIST-like inputs: pixels in [0, 1], most of them 0 */
static void make_inputs(float *x, uint64_t n)
{
    uint64_t s = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        const double u = (double)(s >> 11) / 9007199254740992.0;
        x[i] = u < 0.6 ? 0.0f : (float)((u - 0.6) / 0.4);
    }
}

/* Runs the network on the library: LayerNorm (library) then BitLinear. */
static void run_library(bitnet_backend *be, const float *x, float **layer_in, float *logits)
{
    const float *h = x;
    float *buf = NULL;
    for (int i = 0; i < NLAYERS; i++) {
        float *hn = malloc(TOKENS * L[i].in * sizeof(float));
        float *y = i == NLAYERS - 1 ? logits : malloc(TOKENS * L[i].out * sizeof(float));
        assert_non_null(hn);
        assert_non_null(y);
        assert_int_equal(bitnet_layernorm_ref(h, TOKENS, L[i].in, L[i].nw.data, L[i].nb.data, 1e-5f, hn), BITNET_OK);
        const bitnet_ternary_matrix w = {L[i].t2, L[i].out, L[i].in, BITNET_SCALE_TENSOR, 0, &L[i].d};
        const bitnet_bitlinear_io io = {.tokens = TOKENS, .x = hn, .bias = L[i].b.data,
                                        .act = i == NLAYERS - 1 ? BITNET_ACT_NONE : BITNET_ACT_RELU, .y = y};
        assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_OK);
        if (layer_in) layer_in[i] = hn;
        else free(hn);
        free(buf);
        buf = y == logits ? NULL : y;
        h = y;
    }
    free(buf);
}

static void first_layer_exact(bitnet_backend *be)
{
    float *x = malloc(TOKENS * L[0].in * sizeof(float)), *logits = malloc(TOKENS * 10 * sizeof(float));
    float *layer_in[NLAYERS];
    make_inputs(x, TOKENS * L[0].in);
    run_library(be, x, layer_in, logits);
    /* layer 0 on its normalized input, once by the library, once here */
    const layer *l = &L[0];
    float *y = malloc(TOKENS * l->out * sizeof(float)), *mine = malloc(TOKENS * l->out * sizeof(float));
    const bitnet_ternary_matrix w = {l->t2, l->out, l->in, BITNET_SCALE_TENSOR, 0, &l->d};
    const bitnet_bitlinear_io io = {.tokens = TOKENS, .x = layer_in[0], .bias = l->b.data, .act = BITNET_ACT_RELU, .y = y};
    assert_int_equal(bitnet_bitlinear(be, &w, &io), BITNET_OK);
    int8_t *q = malloc(l->in);
    for (uint64_t t = 0; t < TOKENS; t++) {
        const float *xr = layer_in[0] + t * l->in;
        float m = 0.0f;
        for (uint64_t c = 0; c < l->in; c++) m = fabsf(xr[c]) > m ? fabsf(xr[c]) : m;
        m = m > 1e-5f ? m : 1e-5f;
        const float s = 127.0f / m;
        for (uint64_t c = 0; c < l->in; c++) {
            const float v = rintf(xr[c] * s);
            q[c] = (int8_t)(v > 127.0f ? 127.0f : v < -128.0f ? -128.0f : v);
        }
        for (uint64_t o = 0; o < l->out; o++) {
            int64_t acc = 0;
            for (uint64_t c = 0; c < l->in; c++) acc += (int64_t)code_at(l, o, c) * q[c];
            const float f = l->d / s;
            float v = (float)acc * f;
            v = v + ((const float *)l->b.data)[o];
            mine[t * l->out + o] = v > 0.0f ? v : 0.0f;
        }
    }
    assert_memory_equal(mine, y, TOKENS * l->out * sizeof(float));
    for (int i = 0; i < NLAYERS; i++) free(layer_in[i]);
    free(q); free(x); free(logits); free(y); free(mine);
}


static void network_vs_float64(bitnet_backend *be)
{
    float *x = malloc(TOKENS * L[0].in * sizeof(float)), *logits = malloc(TOKENS * 10 * sizeof(float));
    make_inputs(x, TOKENS * L[0].in);
    run_library(be, x, NULL, logits);
    /* float64: LayerNorm, ternary weights times d, bias, relu */
    double *h = malloc(TOKENS * L[0].in * sizeof(double));
    for (uint64_t i = 0; i < TOKENS * L[0].in; i++) h[i] = x[i];
    for (int i = 0; i < NLAYERS; i++) {
        const layer *l = &L[i];
        double *y = malloc(TOKENS * l->out * sizeof(double));
        const float *nw = l->nw.data, *nb = l->nb.data, *bias = l->b.data;
        for (uint64_t t = 0; t < TOKENS; t++) {
            double *hr = h + t * l->in, mean = 0, var = 0;
            for (uint64_t c = 0; c < l->in; c++) mean += hr[c];
            mean /= (double)l->in;
            for (uint64_t c = 0; c < l->in; c++) var += (hr[c] - mean) * (hr[c] - mean);
            var /= (double)l->in;
            for (uint64_t c = 0; c < l->in; c++) hr[c] = (hr[c] - mean) / sqrt(var + 1e-5) * nw[c] + nb[c];
            for (uint64_t o = 0; o < l->out; o++) {
                double s = 0;
                for (uint64_t c = 0; c < l->in; c++) s += code_at(l, o, c) * hr[c];
                s = s * l->d + bias[o];
                y[t * l->out + o] = i < NLAYERS - 1 && s < 0 ? 0 : s;
            }
        }
        free(h);
        h = y;
    }
    double num = 0, den = 0;
    int agree = 0;
    for (uint64_t t = 0; t < TOKENS; t++) {
        int a = 0, b = 0;
        for (int k = 0; k < 10; k++) {
            const double e = logits[t * 10 + k] - h[t * 10 + k];
            num += e * e;
            den += h[t * 10 + k] * h[t * 10 + k];
            if (logits[t * 10 + k] > logits[t * 10 + a]) a = k;
            if (h[t * 10 + k] > h[t * 10 + b]) b = k;
        }
        agree += a == b;
    }
    print_message("# %s: logits NMSE vs float64 %.3g, same class %d/%d\n", bitnet_backend_describe(be), num / den, agree,
                  TOKENS);
    assert_true(num / den < 5e-3);
    assert_true(agree >= TOKENS * 95 / 100);
    free(h); free(x); free(logits);
}

static void test_cpu(void **state)
{
    (void)state;
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "cpu", 2), BITNET_OK);
    first_layer_exact(be);
    network_vs_float64(be);
    bitnet_backend_free(be);
}

static void test_opencl(void **state)
{
    (void)state;
    bitnet_backend *be;
    if (bitnet_backend_create(&be, "opencl", 1) != BITNET_OK) skip();
    first_layer_exact(be);
    network_vs_float64(be);
    bitnet_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu),
        cmocka_unit_test(test_opencl),
    };
    return cmocka_run_group_tests(tests, load_model, free_model);
}
