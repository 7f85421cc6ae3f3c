/*
 * bitlinear_amx.c - the tiled BitLinear of bitlinear_tiles.h on AMX
 * (compiled with -mamx-tile -mamx-int8); used only when amx.c found the
 * instructions and the kernel granted the tile state.
 */
#include <immintrin.h>
#include <stdint.h>

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static void tile_config_load(void)
{
    _Alignas(64) tile_config cfg;
    __builtin_memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 6; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
}

#define TILES_FN bn_t2_tiles_amx
#define TILE_CONFIG() tile_config_load()
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, p, stride) _tile_loadd(t, (const void *)(p), stride)
#define TILE_DP(c, a, b) _tile_dpbusd(c, a, b)
#define TILE_STORE(t, p, stride) _tile_stored(t, (void *)(p), stride)
#include "bitlinear_tiles.h"
