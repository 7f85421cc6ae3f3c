/*
 * bitlinear_amx_emu_avx2.c - the tiled BitLinear of bitlinear_tiles.h with
 * the AMX tile operations done in plain C (the decode of the weights is the
 * same AVX2 code as on AMX).  Slow; it exists so that tests on machines
 * without AMX check the tiling logic exactly (BITNET_AMX_EMULATE=1).
 */
#include <stdint.h>
#include <string.h>

/* eight tiles of 16 rows x 64 bytes, per thread as on the hardware */
static _Thread_local uint8_t emu_tile[8][16][64];

static void emu_load(int t, const void *p, size_t stride)
{
    for (int r = 0; r < 16; r++) memcpy(emu_tile[t][r], (const uint8_t *)p + (size_t)r * stride, 64);
}

static void emu_store(int t, void *p, size_t stride)
{
    for (int r = 0; r < 16; r++) memcpy((uint8_t *)p + (size_t)r * stride, emu_tile[t][r], 64);
}

/* TDPBUSD: c[m][n] += sum over k of (uint8)a[m][4k + i] * (int8)b[k][4n + i], wrapping in 32 bits */
static void emu_dpbusd(int c, int a, int b)
{
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            uint32_t acc;
            memcpy(&acc, &emu_tile[c][m][4 * n], 4);
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 4; i++)
                    acc += (uint32_t)((int32_t)emu_tile[a][m][4 * k + i] * (int32_t)(int8_t)emu_tile[b][k][4 * n + i]);
            memcpy(&emu_tile[c][m][4 * n], &acc, 4);
        }
}

#define TILES_FN bn_t2_tiles_emu
#define TILE_CONFIG() memset(emu_tile, 0, sizeof emu_tile)
#define TILE_RELEASE() ((void)0)
#define TILE_ZERO(t) memset(emu_tile[t], 0, sizeof emu_tile[t])
#define TILE_LOAD(t, p, stride) emu_load(t, p, stride)
#define TILE_DP(c, a, b) emu_dpbusd(c, a, b)
#define TILE_STORE(t, p, stride) emu_store(t, p, stride)
#include "bitlinear_tiles.h"
