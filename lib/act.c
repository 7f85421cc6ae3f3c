/*
 * act.c - the activation functions that BitLinear and the float product
 * apply after the bias: names, parsing, and the scalar definition every
 * backend follows (the OpenCL kernels spell the same float expressions).
 */
#include "internal.h"

#include <math.h>
#include <string.h>

static const char *const act_names[BITNET_ACT_COUNT] = {
    "none", "relu", "gelu", "gelu-tanh", "sigmoid", "silu",
};

const char *bitnet_act_name(bitnet_act a)
{
    if ((unsigned)a >= BITNET_ACT_COUNT) return NULL;
    return act_names[a];
}

bitnet_status bitnet_act_parse(const char *name, bitnet_act *out)
{
    if (!name || !out) return bn_fail(BITNET_E_INVALID, "activation: NULL argument");
    for (int i = 0; i < BITNET_ACT_COUNT; i++) {
        if (strcmp(name, act_names[i]) == 0) {
            *out = (bitnet_act)i;
            return BITNET_OK;
        }
    }
    if (strcmp(name, "gelu_tanh") == 0) {
        *out = BITNET_ACT_GELU_TANH;
        return BITNET_OK;
    }
    return bn_fail(BITNET_E_INVALID, "unknown activation '%s' (none, relu, gelu, gelu-tanh, sigmoid, silu)", name);
}

/* Every operation here is a single IEEE float operation (no contraction:
 * ISO C mode compiles with -ffp-contract=off), so relu and none are exact on
 * every backend and the others differ only by the libm used (erff, tanhf,
 * expf). */
float bn_act_ref(bitnet_act a, float v)
{
    switch (a) {
    case BITNET_ACT_RELU:
        return v > 0.0f ? v : 0.0f;
    case BITNET_ACT_GELU: /* 0.5 v (1 + erf(v/sqrt2)), as erfc: no cancellation for v < 0 */
        return 0.5f * v * erfcf(v * -0.70710678118654752f);
    case BITNET_ACT_GELU_TANH: { /* 0.5 v (1 + tanh u) = v / (1 + exp(-2u)): no cancellation */
        const float v3 = v * v * v;
        const float inner = 0.79788456080286536f * (v + 0.044715f * v3);
        return v / (1.0f + expf(-2.0f * inner));
    }
    case BITNET_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-v));
    case BITNET_ACT_SILU:
        return v / (1.0f + expf(-v));
    default:
        return v;
    }
}
