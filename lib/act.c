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

/* relu and none are single float operations, the same bits on every
 * backend.  The others are evaluated in double and rounded once to float:
 * then both sides are within about half an ulp of the true value, so devices
 * with fp64 (the OpenCL kernels use the same double expressions) agree to an
 * ulp or so, whatever the accuracy of their single precision erfc/exp. */
float bn_act_ref(bitnet_act a, float v)
{
    switch (a) {
    case BITNET_ACT_RELU:
        return v > 0.0f ? v : 0.0f;
    case BITNET_ACT_GELU: /* 0.5 v (1 + erf(v/sqrt2)), as erfc: no cancellation for v < 0 */
        return (float)(0.5 * (double)v * erfc((double)v * -0.70710678118654752));
    case BITNET_ACT_GELU_TANH: { /* 0.5 v (1 + tanh u) = v / (1 + exp(-2u)): no cancellation */
        const double d = v;
        const double inner = 0.79788456080286536 * (d + 0.044715 * (d * d * d));
        return (float)(d / (1.0 + exp(-2.0 * inner)));
    }
    case BITNET_ACT_SIGMOID:
        return (float)(1.0 / (1.0 + exp(-(double)v)));
    case BITNET_ACT_SILU:
        return (float)((double)v / (1.0 + exp(-(double)v)));
    default:
        return v;
    }
}
