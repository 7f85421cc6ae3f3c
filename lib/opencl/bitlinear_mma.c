/*
 * bitlinear_mma.c (OpenCL) - host side of bl_mma_skinny and bl_gemm_mma
 * (kernels/bitlinear.cl): BitLinear for 2 tokens and more on NVIDIA INT8
 * tensor cores (inline PTX mma.sync m16n8k32), called by bn_ocl_bitlinear
 * once it has uploaded the weights, the quantized activations and their
 * per-token sums.  The mma is emulated in plain OpenCL C on other devices
 * (tests).
 *
 * 2 to 8 tokens (16 where the rows are narrow: MMA_SKINNY_* below):
 * bl_mma_skinny, codes and activations loaded straight into the fragments,
 * 16 * SK_T rows a work-group, SK_W warps splitting k, SK_A the next
 * step's loads in flight (from the shape), SK_N token tiles a pass
 * (defaults SK_DEF_* below, as in the kernel; BITNET_MMA_OPTS may name
 * them).
 * H200, 2026-11-27, kernel time of the whole product (q_acts_rows
 * included), weights kept, two rounds, before (2 to 7 tokens bl_gemv_nv3,
 * 8 bl_gemm_mma) / after, us:
 *   16384x16384  2: 63.7-64.2 / 36.2-37.3  4: 102-103 / 35.8-37.3  8: 51.1-52.3 / 41.9-44.2
 *   14336x4096   2: 32.6-33.2 / 21.3-22.0  4: 39.4-39.9 / 22.5-22.8  8: 32.3-32.8 / 23.6-27.0
 *   4096x14336   2: 26.7-28.8 / 28.4-28.6  4: 37.1-37.6 / 25.7-26.4  8: 30.0-30.1 / 29.4-32.7
 *   4096x4096    2: 20.1-20.3 / 19.5-19.6  4: 22.3 / 18.6-20.3       8: 25.5-26.5 / 17.9-20.8
 * The settings came from a sweep in one call before it (same shapes, 2, 4
 * and 8 tokens): 8 warps, 4 row tiles and one segment in flight won or
 * tied everywhere; one row tile was twice as slow at 8 tokens on
 * 16384x16384 (93-105 us: every 16 rows read the 8 tokens' activations
 * again), 2 tiles 72-83 us, 4 warps with 4 tiles 47-55 us.  One token
 * stays on the GEMV (bl_gemv_nv4, 32-34 us on 16384x16384).  That GEMV at
 * 2 to 8 tokens (BITNET_MMA_MIN_TOKENS=100 BITNET_GEMV_NV=4, NV_TT=8) lost
 * everywhere on an H100 (2026-12-07, two rounds, kernel medians, us,
 * bl_mma_skinny / nv4): 16384x16384 2 tokens 33.1-33.6 / 51.1-51.4, 8
 * tokens 37.4-37.8 / 152.3-152.4; 4096x14336 18.0-18.4 / 19.6-20.3 and
 * 20.4-20.5 / 39.2-41.6; 14336x4096 14.2 / 24.9-25.5 and 16.1-16.6 /
 * 42.4-43.9: once the codes are shared, the dp4a against each token's
 * staged activations is the work, which the tensor cores do for free.
 *
 * More tokens: bl_gemm_mma.
 *
 * Launch geometry comes from the kernel's tunables, chosen here from the
 * shape unless BITNET_MMA_OPTS names them (see bitlinear.c for the env vars):
 *   MMA_NT  tokens per pass: the token count rounded up to 8, at most 32
 *           up to 64 tokens and 64 above (more tokens: equal passes, one
 *           per work-group along dim 0)
 *   MMA_WM  warps along rows (4)     MMA_MT  16-row tiles per warp (2)
 *   MMA_KB  blocks per chunk (2)     MMA_ST  chunks in flight (3)
 *   MMA_KP  (host only) k parts over work-groups: by default one where
 *           the other dimensions give a work-group per compute unit, else
 *           up to MMA_FILL per compute unit in balanced waves (mma_parts);
 *           their integer sums go to a scratch and bl_mma_sum adds them in
 *           order.
 * Three stages instead of two, and the balanced waves (H100, driver
 * 580.159.04, 2026-12-06, one call, two alternating rounds of
 * `BITNET_OCL_BLOCK_TOKENS=0 SETTINGS="|" SHAPES=16384x16384,4096x14336,
 * 14336x4096,4096x4096 TOKENS=16,64 bash tests/device/mma-sweep.sh` with
 * the bench of c5eb3f7 and this one; kernel medians of the product in us,
 * after / before): 64 tokens 78.8-79.0 / 79.2, 26.2-26.4 / 27.9-28.1 (4
 * parts against 5), 29.4-29.7 / 31.3-32.4, 18.8-21.2 / 20.2-22.0; 16
 * tokens 50.2-50.4 / 47.8-49.8, 22.6-22.8 / 22.5-24.1, 21.3-21.9 /
 * 21.0-21.6, 15.2-15.3 / 14.6-15.1 (level or a little slower).  512
 * tokens, the call before (three stages, the same parts): 449.6-451.9 /
 * 456.4-458.4, 108.3-108.8 / 110.7-111.6, 147.9-148.2 / 157.2-157.5,
 * 44.6 / 46.7-46.8.  In the first call of the day three stages alone
 * (-DMMA_ST=3 against -DMMA_ST=2, two rounds) were 1.6-6% faster at 512
 * tokens on all four shapes and faster at 64 on three (4096x14336 28.4
 * against 27.7-28.0); the kernel before 82e3790 showed the same.  The
 * parts' rule before (enough for MMA_FILL per compute unit, rounded up)
 * gave 5 parts at 64 tokens of 4096x14336 (320 work-groups: three on some
 * compute units, two on others); rounding down instead gave 2 rather than
 * 3 at 16 tokens of 16384x16384, 54.0-54.4 against 47.6-49.5 us.
 * Measured on an H100 (tests/device/mma-sweep.sh, medians of the kernel
 * time of the whole product, q_acts_rows and bl_mma_sum included; two
 * rounds in one call, 2026-11-27), against the kernel before (codes loaded
 * from global memory into registers, activations staged through registers,
 * token passes along dim 2, the epilogue unrolled per accumulator tile):
 * - 512 tokens: 16384x16384 518-520 us against 622-626, 4096x14336 157-158
 *   against 192, 14336x4096 167-168 against 188-189, 4096x4096 77 against
 *   78; 64 tokens: 16384x16384 119 against 138, 4096x14336 42.5-42.8
 *   against 41.1-41.2, 14336x4096 51-54 against 52-54, 4096x4096 26-32
 *   against 27-28; 8 tokens: 16384x16384 55-58 against 44 (slower),
 *   4096x14336 25-32 against 25-27, the two others within 3 us.
 * - 64 tokens a pass from 65 tokens on: the 512-token figures above; at
 *   64 tokens one pass of 64 took 118 / 40 / 58-60 / 30-34 us against
 *   120-122 / 43 / 53-54 / 27-32 with two of 32 (same shapes in that order,
 *   two calls).
 * - 3 stages against 2: within 4% everywhere (the extra copies in flight
 *   buy nothing, so the loop is not waiting on memory latency alone).
 * - k parts: one part (-DMMA_KP=1) at 64 tokens of 4096x14336 took 57 us
 *   of bl_gemm_mma against 29.5 + 5.9 (bl_mma_sum) with the host's 2.  The
 *   time goes with the chunks a work-group walks, not with the work; why
 *   (at 0.7-3.5 us a chunk of 256 mma per work-group) is not known yet.
 * - Codes straight from global memory into registers (the next
 *   super-block's loaded while this one is computed), only the activations
 *   staged, offsets of the loads and copies computed once a pass (H200,
 *   2026-11-27, two rounds in one call against bcdad23, which staged the
 *   codes through local memory too; kernel medians of the whole product):
 *   16384x16384 16/64/512 tokens 53.2-56.2 / 96.5-97.4 / 516-517 us against
 *   51.0-52.7 / 89.0 / 462; 4096x14336 29.5-31.8 / 42.5-42.8 / 139-140
 *   against 29.9-35.2 / 39.5-39.9 / 125; 14336x4096 30.8-31.7 / 40.7-41.5 /
 *   166 against 25.6-26.4 / 35.5-39.8 / 161; 4096x4096 21.2-21.7 /
 *   28.9-31.4 / 59.0-59.1 against 24.3-25.0 (slower) / 25.8-30.3 / 56.6.
 *   The same kernel with no code loads and no copies (registers and stages
 *   left as they were) took 59 us at 64 tokens and 303 at 512 on
 *   16384x16384, and with the mma replaced by integer adds it was slower
 *   than with it: the loop's own instructions (decoding, local loads,
 *   addresses), not the tensor cores or memory, take most of the time.
 *   Other settings of it, same calls: 8 warps of 2 tiles were 4% faster at
 *   512 tokens on 16384x16384 (443 us) and 12% at 64 tokens of 4096x14336
 *   (35 us), slower elsewhere (14336x4096 at 64 tokens 48 us, 4096x4096 at
 *   512 86 us); 4 warps of 4 tiles took 37 against 41 us at 64 tokens of
 *   4096x14336 and were slower elsewhere; 2 warps of 4 tiles (255
 *   registers), 16-token passes and 4 blocks a chunk were slower
 *   everywhere; one 64-token pass at 64 tokens took 39 against 41 us on
 *   4096x14336 but 99 against 92 on 16384x16384 and 61 against 37 on
 *   14336x4096.  In a later call (H200, same kernel, 16384x16384 at 64
 *   tokens 81.5 us by default): 2 warps along k in a work-group, each
 *   taking every other super-block of 4-block chunks (190 registers), 94 us;
 *   2 k parts over work-groups 93 us (4096x14336 at 512 tokens 143 against
 *   124).  A third call, 64 tokens, the host's choice against one 64-token
 *   pass with 2 k parts (each decoded word then feeds 8 mma, with as many
 *   work-groups as two passes): 16384x16384 88.3-88.7 against 86.6-86.7 us,
 *   4096x14336 39.6-39.9 against 52.9-53.0, 14336x4096 36.8-39.1 against
 *   47.0-51.8, 4096x4096 28.3-34.4 against 35.8-39.4.
 * Tried and not kept: row tiles starting at different chunks (no change);
 * 6 or 12 k parts at 8 and 16 tokens (within noise).  Earlier, on the
 * kernel before (H200, 2026-11-26): k parts instead of a k split inside the
 * work-group (64 tokens of 4096x14336 49.0 against 94.5 us); 32 tokens a
 * pass against 64 at 64 tokens; the k parts added by the work-group that
 * finishes a tile last instead of bl_mma_sum (61.6 against 40.8 us).
 * Tried and not kept yet (H200, 2026-12-03; the code is on the branch
 * wgmma-gemm): bl_gemm_wg, Hopper's wgmma.mma_async m64nNk32 (u8 codes
 * decoded into A registers, the activations staged by cp.async as 8 x 16
 * byte core matrices read through a descriptor) reached from OpenCL C by
 * patching the program's PTX to sm_90a (tests/device/wgmma.c: the
 * instruction runs at 1.9 POPS, 1.5x mma.sync).  Exact on the H200 and
 * under emulation, but slower, two alternating rounds, kernel medians of
 * the product in us, bl_gemm_wg (64 tokens a pass, 2 tiles of 64 rows,
 * chunks of 2 blocks) against this kernel: 16384x16384 at 16 / 64 / 512
 * tokens 66.9-71.0 / 150.8-154.1 / 748.6-781.1 against 44.4-47.2 /
 * 82.4-82.8 / 454-458; 4096x14336 28.1-29.6 / 41.8-42.1 / 166.9-171.7
 * against 23.9-25.7 / 32.0-32.4 / 110.7-112.4.  Waiting for each block's
 * group only after issuing the next changed nothing; of five other
 * geometries the best at 512 tokens of 16384x16384 was 4 row tiles of 64
 * (633 us).  The codes staged by cp.async beside the activations (three
 * stages of one block), in a later call: 16384x16384 62.2-62.7 / 145.0-
 * 150.9 / 673-680 us, 4096x14336 25.8-26.8 / 57.4-57.9 / 162.4-162.8,
 * 14336x4096 at 512 tokens 250.5-250.9 against 157.1-157.3, 4096x4096
 * 65.2-65.5 against 47.3-47.4; 4 row tiles of 64 622 us on 16384x16384 at
 * 512, 128 tokens a pass with one tile 1132 us.  Where the time goes, a
 * third call, 16384x16384 at 64 / 512 tokens: the default 144 / 669 us
 * (this kernel 82 / 457); with the copies after the first stages left out
 * (wrong sums) 72 / 285, with the wgmma left out 113 / 623.  So the
 * streaming into local memory, not the tensor cores, holds it back, and
 * larger tiles did not help: two warpgroups a work-group sharing the
 * activations (half the bytes staged) took 180 / 922 us, and more than two
 * do not launch (CL_KERNEL_WORK_GROUP_SIZE 256).  Not yet tried: a copy
 * order without bank conflicts (in the unit-major layout the 8 lanes that
 * copy one token's units write 1 KiB apart), or the codes repacked once
 * on the device so that a lane's A words are one 16-byte load.  ptxas's
 * notes on the patched build were not read.
 * Tried again and not kept (H200, 2026-12-04, one call, kernel medians of
 * two alternating rounds, 16 / 64 / 512 tokens, us): that copy order
 * (tokens in turn, WG_CPORD) 61.8 / 142 / 636 on 16384x16384, with the
 * activations' copies through L1 as well 52.4 / 133 / 613, 4096x14336 26.2
 * / 53.9 / 135 (this kernel 46.3-47.3 / 81.5-82.1 / 456-457 and 23.3-24.9
 * / 32.4-32.5 / 111.5-111.9); and bl_gemm_wt, the roles turned round
 * (activations straight from global memory into wgmma's A registers, the
 * codes decoded by the work-group into local memory as B, 128 rows a
 * work-group): 16384x16384 123-125 / 159-160 / 801, 4096x14336 50-52 /
 * 62 / 171-174, 14336x4096 at 512 tokens 284-285 against 157; with 2
 * blocks in registers instead of 4, 79 / 106 / 830 on 16384x16384.  In the
 * same call cuBLAS bf16 took 145 / 147 / 369 us on 16384x16384.  Neither
 * wins a case; the code went (it was never on main).
 * Tried and not kept (H200, 2026-12-05, one call, two alternating rounds,
 * kernel medians in us; exact natively on an H100, 25 mma and 20 group mma
 * runs of test_bitlinear): a leaner bl_gemm_mma loop (chunks inside the row
 * copied and loaded without checks in a loop of their own, rows and tokens
 * past the count reading the last one instead of zeros, stage positions
 * padded instead of swizzled; 268 instructions per 64 mma against 371,
 * 229 registers against 150).  At 512 tokens 1-7% faster (16384x16384
 * 449-452 against 455, 4096x14336 105.6-105.8 against 111.0-111.5,
 * 14336x4096 152.3-152.5 against 158.0-158.6, 4096x4096 44.2 against
 * 47.5-47.6), but at 16 tokens slower on the wide rows (16384x16384
 * 46.3-47.7 against 45.3-45.4, 4096x14336 24.2-24.9 against 20.8-23.7) and
 * mixed at 64 (4096x14336 30.9 against 32.3, 16384x16384 83.9-86.0
 * against 82.9-83.1).  Not a win everywhere: the code stays on the branch
 * mma-lean.
 * Tried again and not kept (H100, driver 580.159.04, 2026-12-06, one call,
 * two alternating rounds, one launch per product: BITNET_OCL_BLOCK_TOKENS=0,
 * kernel sources swapped by BITNET_KERNEL_DIR, kernel medians in us): the
 * checked loop kept as it is and a second loop for full tiles (every row
 * and token of the work-group live, the part whole chunks), its copies and
 * code loads unchecked (284 instructions per 64 mma against 371 by
 * tests/device/sass-loop.sh, 230 registers against 150).  64 tokens
 * 4096x14336 30.4 against 32.3-32.5, 14336x4096 31.0-35.3 against
 * 31.6-32.3, 16384x16384 80.7-80.9 against 80.2-80.4, 4096x4096 20.3-24.0
 * against 20.6-21.6; 512 tokens slower everywhere: 124.6-125.3 against
 * 111.1-111.8, 173.6-174.2 against 159.1-159.5, 520.0-522.1 against 456.7-
 * 456.8, 50.8-51.2 against 47.2-47.3.  The full loop alone (every tile
 * full, 160 registers): 64 tokens 30.1-30.4, 32.8-34.4, 80.2-80.6,
 * 25.3-29.3; 512 tokens 119.5, 174.3-175.7, 491.6-493.7, 50.0-50.3; with
 * one row tile a warp (104 registers, twice the work-groups) 37.3-37.7,
 * 40.4, 115.2-115.6, 23.2-28.1 and 209.7-210.0, 193.0-193.2, 729.9-732.5,
 * 74.6-75.0.  Fewer instructions did not make the loop faster.  The
 * default list of tests/device/mma-sweep.sh in the same call, 64 tokens in
 * one launch, found nothing better than the host's choice (4096x14336
 * 32.2, 14336x4096 33.7, 16384x16384 80.0, 4096x4096 20.3 us): 3 stages
 * (31.4 / 35.8 / 79.8 / 21.5), 16-token passes with 4 stages (31.7 / 33.7
 * / 96.9 / 20.7) and 6 k parts (29.9 / 57.5 / 101.0 / 28.7) were faster on
 * one shape and slower on others, one row tile of 8 warps slower on all;
 * one 64-token pass 104.1 on 16384x16384, signed codes 89.0.
 * Tried and not kept (H100, 2026-12-06, one call, two rounds of
 * tests/device/mma-sweep.sh with BITNET_OCL_BLOCK_TOKENS=0, kernel sources
 * swapped by BITNET_KERNEL_DIR, kernel medians in us): whether the loop
 * waits on its code loads, issued one super-block ahead.  An L2 prefetch
 * (prefetch.global.L2) of each row's codes 2, 4 or 8 super-blocks ahead was
 * slower everywhere: 64 tokens 16384x16384 83.8-85.2 against 79.6,
 * 4096x14336 33.2-34.2 against 32.3, 512 tokens 471-474 against 460 and
 * 113.8-114.5 against 110.4-110.9; the codes loaded two super-blocks ahead
 * into registers (16 more) were level: 80.4, 32.5-32.6, 460.1-460.9,
 * 110.6-110.7, 14336x4096 at 64 tokens 30.7-32.4 against 32.4-32.6.  So
 * the loop does not wait on the codes' latency either.
 * Where the time goes, counted by the warps themselves
 * (tests/device/mma-clocks.sh, H100, 2026-12-06, 64 tokens, medians over
 * the warps, cycles): 16384x16384 (one k part) 135398 for the kernel, of
 * which a chunk's wait and barrier 86, the next chunk's copies 286, its
 * decode, local loads and mma 1392 (64 chunks), the epilogue 6578;
 * 4096x14336 (five k parts, 8 to 12 chunks a warp) 33683-34656, the
 * epilogue 7151-7486 (a fifth), of which 7074 in its loop of stores to the
 * k parts' scratch.  So since then a k part's sums go straight from the
 * registers to the scratch (H100 with a model-143 host, one call, two
 * alternating rounds of tests/device/mma-sweep.sh, kernel sources swapped
 * by BITNET_KERNEL_DIR, the switch it had then against the default,
 * kernel medians of the product in us, bl_mma_sum included): 64 tokens
 * 4096x14336 27.7-27.8 against 32.1-32.2, 4096x4096 16.4-16.8 against
 * 19.4-19.6, 16384x16384 78.5-78.7 against 79.2-79.5, 14336x4096 29.3 and
 * 34.9 against 29.8; 512 tokens 451.5-452.8 against 455.9-457.1,
 * 109.5-109.6 against 110.6-110.8, 155.5 against 158.8-159.2, 46.2-46.3
 * against 47.1-47.2; exact against the _ref in the same call.  Tried in
 * the same call and not kept: the one-part epilogue's loop unrolled 4
 * times (level at 64 tokens, 1-2% slower at 512), with the rows' and
 * tokens' operands first staged in local memory (512 tokens 8-12% slower:
 * 16384x16384 510.8-512.2 us); 64-token passes of 8 warps (16384x16384 at
 * 64 tokens 99.5 us; with the direct stores 82.9-83.3 at 64 and 426-429 at
 * 512, 4096x4096 at 512 57.4 against 46.2).
 * Tried and not kept (H100, 2026-12-06, one call, two rounds of
 * tests/device/mma-sweep.sh, kernel medians in us, 16384x16384 /
 * 4096x14336 / 14336x4096 / 4096x4096; tests/perf/NOTES.md has every
 * figure): the host's choice at 64 tokens 78.9-79.6 / 26.4-26.6 /
 * 29.1-29.4 / 17.8-18.8 against two k parts 91.3-91.5 / 35.7 / 36.6-37.9
 * / 18.9-19.9 (more warps over the same work: slower), chunks of 4 blocks
 * 88.5-91.2 / 28.4-28.6 / 31.6-33.1 / 17.5-18.6, and the driver's register
 * cap (-cl-nv-maxrregcount=128 in BITNET_MMA_OPTS: four work-groups a
 * compute unit) 78.7 / 26.7-26.8 / 29.6-29.8 / 18.8-19.7; at 512 tokens the
 * cap 446.9-447.6 / 107.7-108.2 / 147.0-147.7 / 44.4-44.7 against
 * 446.6-446.9 / 107.7-107.8 / 147.0-147.2 / 44.3-44.5.
 * Tried and not kept (same machine and day, one call, two alternating
 * rounds, same shapes and units): with one k part, each lane's sums scaled
 * and stored straight from the registers (bias, activation and residual
 * unrolled per tile, 8 consecutive rows of a token a quarter-warp) instead
 * of through local memory and one loop of stores.  Exact (15 of 15 checks
 * of the sweep natively, 28 emulated runs of test_bitlinear), but slower:
 * 64 tokens 83.5-84.1 / 27.1-27.6 / 30.7-32.0 / 18.1-19.7 against
 * 79.0-79.1 / 26.2-26.4 / 29.2-30.5 / 17.9-19.4, 512 tokens 530.5-531.9 /
 * 121.3-122.8 / 203.1-203.5 / 50.6-50.8 against 448.9-449.5 / 108.0-108.1
 * / 147.3-147.8 / 44.5-44.9; 16 tokens level (k parts there).
 */
#include "../cpu/bitlinear.h"
#include "ocl.h"
#include "tensor_ops.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MMA_MIN_TOKENS 2
/* bl_mma_skinny up to MMA_SKINNY_MAX tokens, and up to MMA_SKINNY_WIDE where
 * the rows have at most MMA_SKINNY_IN columns (several token tiles a pass);
 * beyond, bl_gemm_mma.  H200, 2026-11-27, two rounds in one call, kernel
 * time of the whole product at 9 / 12 / 16 tokens, bl_gemm_mma against
 * bl_mma_skinny (us): 14336x4096 30.6-31.8 / 30.6-31.1 / 31.5-32.3 against
 * 23.2-25.5 / 25.7-26.6 / 27.3-28.4; 4096x4096 25.8-26.5 / 24.9-25.4 /
 * 21.4-25.6 against 18.0-20.8 / 18.0-21.0 / 18.6-21.5; but 16384x16384
 * 52.4-55.9 / 50.2-51.1 / 51.9-57.8 against 48.3-49.6 / 52.7-53.1 /
 * 61.1-62.0 and 4096x14336 29.2-29.8 / 26.8-31.3 / 28.0-34.2 against
 * 27.8-31.2 / 30.8-36.4 / 35.2-38.8 (no width between 4096 and 14336 was
 * measured).  Other settings at 9 to 16 tokens (2 row tiles, 4 warps, 8
 * tiles of 4 warps, 2 segments in flight) were slower or equal.
 * Tried and not kept (H100, 2026-11-27, two rounds, kernel medians of the
 * product, 2/4/8 tokens): the next step's codes loaded into registers
 * while this one is computed (a -DSK_P switch, built and checked under
 * emulation, then deleted): 16384x16384 43.5-44.7 / 44.0-44.7 / 47.4-47.6
 * us against 34.3-34.4 / 35.2-35.5 / 37.9-38.0, 14336x4096 18.9-22.6
 * against 14.4-17.3; with 2 row tiles it won only on the narrow rows
 * (4096x4096 10.4-11.5 against 12.3-13.4 us, 4096x14336 at 2 and 4 tokens
 * 18.8-21.2 against 20.4-20.9) and lost on the wide ones (16384x16384 at 8
 * tokens 56-57 us).  2 row tiles alone: 4096x4096 11.4-12.1 us against
 * 12.3-13.4 at 2 to 8 tokens, slower on the three other shapes.
 * The settings again on an H100 (2026-12-06, one call, one run of each,
 * product in one launch, kernel medians at 4 / 8 tokens in us; the
 * defaults: 4 row tiles, 8 warps, one segment in flight): 4096x14336
 * 21.3 / 21.6, 14336x4096 15.6 / 17.3, 16384x16384 34.6 / 37.3, 4096x4096
 * 12.0 / 13.5.  2 row tiles 22.9 / 24.6, 17.7 / 21.7, 40.8 / 56.3, 12.9 /
 * 13.6; one row tile 18.9 / 27.0, 22.6 / 32.2, 53.4 / 89.0, 12.1 / 14.5
 * (with 4 warps 22.6 / 27.4, 17.8 / 27.6, 52.7 / 89.9, 13.3 / 15.6); 2
 * segments in flight 25.3 / 28.2, 21.2 / 23.0, 55.0 / 59.0, 13.7 / 14.7,
 * and with 2 row tiles 19.3 / 21.6, 18.2 / 23.0, 39.8 / 54.2, 11.7 / 13.0.
 * The defaults stay: nothing won at 8 tokens, where 4096x14336 (14.7 MB)
 * takes 21.6 us, the one-token GEMV 12.8 (the README's H100 table).
 * Where the 8-token time goes (another H100 call the same day, kernel
 * sources with switches leaving parts out, swapped by BITNET_KERNEL_DIR;
 * 4096x14336 / 14336x4096 / 16384x16384 / 4096x4096, medians of two or
 * three runs in us): the defaults 20.4-22.7 / 15.9-18.3 / 35.2-38.1 /
 * 13.6-15.0, the one-token GEMV 13.3 / 15.5 / 31.1 / 10.0.  Codes not
 * loaded (made from the indices) 15.7-17.3 / 13.6-14.0 / 26.7-27.5 /
 * 10.2-10.7; activations not loaded 18.6-20.1 / 13.8-16.3 / 31.9-33.4 /
 * 11.9-13.3; neither (one run) 11.7 / 8.7 / 13.7 / 7.3; the mma replaced by integer
 * adds 22.9-23.9 / 16.9-18.4 / 36.9-37.9 / 12.6-12.7; no sums through
 * local memory at the end 20.4-21.6 / 15.1-16.1 / 35.0-35.2 / 10.9-11.9.
 * So the tensor cores cost nothing and each warp's steps wait on the code
 * and activation loads together.  Tried and not kept, same call: the codes
 * masked in place instead of shifted (4^sh times the code, a set of sums
 * per shift added exactly at the end, as bl_gemv_nv4 does; 280
 * instructions per 32 mma against 398, 168 registers against 94) 24.0-25.4
 * / 21.2-22.4 / 51.8-52.5 / 13.5-15.1, with 2 row tiles 21.5 / 23.3 / 53.1
 * / 12.4; the next step's codes prefetched into L2 (prefetch.global.L2)
 * one step ahead 21.9-22.6 / 18.9-20.8 / 43.7-44.5 / 13.8-14.8, two steps
 * 24.0-24.1 / 16.6-17.0 / 45.8-46.4 / 13.4-13.5.  16 warps a work-group
 * do not launch (CL_KERNEL_WORK_GROUP_SIZE 256).
 * K parts over work-groups, so that the 64 work-groups of a 4096-row shape
 * become 128 to 256 with 4 row tiles each (the parts' sums finished by
 * bl_mma_sum, as bl_gemm_mma's), a third H100 call, two rounds, 8 tokens,
 * the kernels of the product added: the defaults 20.4 / 16.1-16.2 /
 * 35.6-35.9 / 12.4, 2 parts 20.9-21.3 / 21.5-21.8 / 42.2-42.4 / 15.3-15.6,
 * 3 parts 21.3-21.6 / 23.4-23.7 / 45.5-45.9 / 16.1-16.3, 4 parts 19.6-19.7
 * / 25.0-25.1 / 47.6-47.9 / 16.1, 2 parts of 8 row tiles 29.2-29.3 /
 * 22.2-22.3 / 46.0-47.4 / 16.9-17.1 (4 tokens alike).  Exact on the H100
 * and under emulation, but 4% at best on one shape, and bl_mma_sum's launch
 * costs the others more: not kept. */
#define MMA_SKINNY_MAX 8
#define MMA_SKINNY_WIDE 16
#define MMA_SKINNY_IN 8192
/* Whether bl_mma_skinny takes a call (else bl_gemm_mma). */
static int mma_takes_skinny(const bitnet_ternary_matrix *w, uint64_t tokens)
{
    return tokens <= MMA_SKINNY_MAX || (tokens <= MMA_SKINNY_WIDE && w->in <= MMA_SKINNY_IN);
}

/* The activations' rows in bl_mma_skinny's order (SK_XF, Q_FRAG; the
 * figures are at SK_XF in kernels/bitlinear.cl), where the tensor cores
 * take the call and a row is a multiple of 256 codes (an even count of
 * blocks); bl_one asks it where the device makes the activations only. */
int bn_ocl_mma_frag(const bitnet_ternary_matrix *w, uint64_t tokens, size_t nblocks)
{
    return w->kind != BITNET_SCALE_GROUP && mma_takes_skinny(w, tokens) && nblocks % 2 == 0;
}

#define SK_DEF_W 8 /* bl_mma_skinny's tunables (sk_opts): kernels/bitlinear.cl has the same defaults */
#define SK_DEF_T 4
/* SK_A, the next step's codes and activations loaded while this one
 * computes (two sets of registers taking turns): on where the row tiles
 * give each compute unit at most one work-group, whose 8 warps alone
 * cannot hide the loads' latency; elsewhere the extra registers (94 -> 206
 * by tests/device/sass-loop.sh) cost more than the look-ahead gains.  H100,
 * driver 580.159.04, 2026-12-06, two calls, one launch per product
 * (BITNET_OCL_BLOCK_TOKENS=0 CHECK=0 SHAPES=... TOKENS=8 bash
 * tests/device/mma-sweep.sh with the switch as a setting), kernel medians
 * of the product in us, four rounds at 8 tokens and two at 4, SK_A=1
 * against the defaults before it: 8 tokens 4096x14336 (64 work-groups on
 * 132 compute units) 19.7-20.2 against 21.3-22.3, 4096x4096 11.4-12.4
 * against 12.6-12.9; 4 tokens 17.9-18.4 against 20.4-20.8 and 11.3-12.1
 * against 11.9-12.5; but at 8 tokens 16384x16384 (256 work-groups)
 * 39.0-40.8 against 36.5-38.9 and 14336x4096 (224) 20.1-21.3 against
 * 16.3-17.1.  Tried and not kept, same calls, 8 tokens, 4096x14336 /
 * 4096x4096 / 16384x16384 / 14336x4096: two steps ahead (three sets, 232
 * registers) 20.6-21.4 / 12.0-12.8 / 44.0-44.4 / 22.2-23.1; one ahead
 * with 4 warps 22.8 / 12.4-13.0 / 37.5-38.2 / 16.5-16.9 (level on the
 * wide rows, slower on the narrow), with 2 row tiles 20.4-21.3 /
 * 11.3-12.5 / 53.2-54.6 / 22.2-23.0.  SK_U (segments in flight, 1 by
 * default) went with it: 2 lost on every shape (figures above).
 * Both loops once shared one body that loaded a whole step (the four
 * shifts' activations too) before its products; without SK_A that lost to
 * the loop before it, which loads each shift's activations where they are
 * used, at 12 and 16 tokens of 14336x4096 (two 8-token tiles a pass).
 * H100, 2026-12-07, kernel medians of the product in us, the bench of
 * 60c6a1e (the loop before) / f47fac1 (the shared body), three alternating
 * rounds of `BITNET_OCL_BLOCK_TOKENS=0 CHECK=0 SHAPES=14336x4096,4096x4096,
 * 8192x8192 SETTINGS= TOKENS=12,16 bash tests/device/mma-sweep.sh`:
 * 14336x4096 12 tokens 19.6-20.2 / 22.9-23.0, 16 tokens 21.0-23.8 /
 * 24.4-24.9 (with SK_A forced on 22.6 / 24.4); 4096x4096 and 8192x8192
 * (SK_A on in f47fac1) 13.1-15.5 and 19.9-22.5 in both.  Two rounds the
 * same day at 2, 4, 8 tokens: level on 16384x16384, 14336x4096 and
 * 4096x4096, and 4096x14336 with SK_A 17.1-17.8 / 20.1-20.2 us at 2-4 / 8
 * tokens against 20.3-23.4 / 21.1-21.2.  So without SK_A the loop is the
 * one before again (the same 398 instructions and 94 registers at one
 * token tile, 472 and 134 at two against 136, by tests/device/sass-loop.sh),
 * and timed so the same day (H100, two alternating rounds of the sweep
 * above with SHAPES=16384x16384,4096x14336,14336x4096 TOKENS=2,8,12,16,
 * the bench of 1d5b93a / 60c6a1e): 14336x4096 12 tokens 19.4-19.5 /
 * 18.8-19.6, 16 tokens 21.7-21.9 / 20.9-21.9; 4096x14336 with SK_A 17.0-17.1
 * / 20.6-20.9 at 2 tokens; 16384x16384 level. */
static long sk_ahead(const bn_ocl_caps *caps, uint64_t out, long tiles)
{
    if (tiles < 1 || !caps->compute_units) return 0;
    const uint64_t rows = 16 * (uint64_t)tiles;
    return (out + rows - 1) / rows <= caps->compute_units;
}
#define MMA_MAX_NT 32
#define MMA_MAX_GRID 65535 /* work-groups along dimensions 1 and 2 (NVIDIA's limit) */

/* Group scales of whole blocks (bl_group_mma) from GM_MIN_TOKENS tokens;
 * below, bl_group.  GM_DEF_*: bl_group_mma's tunables (gm_opts), the
 * kernel's defaults.  H200, 2026-12-05, one device call, kernel ms of
 * group:256 (bitnet-bench --op bitlinear --keep-weights), bl_group /
 * bl_group_mma with GM_NT 1 (two runs) / with GM_NT 2 (two runs):
 *   4096x14336    2: 0.053-0.054 / 0.070-0.071 / 0.127   4: 0.083-0.085 / 0.070-0.072 / 0.137-0.138
 *                 8: 0.172 / 0.074-0.076 / 0.149  16: 0.342-0.345 / 0.074-0.075 / 0.160
 *                64: 1.322 / 0.131 / 0.280
 *   16384x16384   2: 0.184 / 0.082-0.083 / 0.151   4: 0.322 / 0.090-0.091 / 0.173
 *                 8: 0.662-0.664 / 0.092-0.093 / 0.179-0.181  16: 1.304-1.308 / 0.097-0.099 / 0.193
 *                64: 5.18 / 0.328 / 0.405
 * (group:128 within a few percent of group:256).  One run each of other
 * settings at 16 / 64 tokens, 4096x14336 and 16384x16384: GM_MT 2 GM_NT 2
 * 0.108 / 0.186 and 0.123 / 0.254 ms; GM_MT 1 GM_NT 4 0.103 / 0.199 and
 * 0.126 / 0.282; GM_MT 2 GM_NT 4 0.234 / 0.431 and 0.276 / 0.596; GM_WM 8
 * 0.255 / 0.449 and 0.312 / 0.636.  One 8-token tile a warp won everywhere
 * but 16384x16384 at 64 tokens (GM_MT 2 GM_NT 2: 0.254 against 0.328).
 * Row scales in the same call: 4096x14336 0.0206 (8 tokens) and 0.0436 ms
 * (64), 16384x16384 0.034 and 0.104: the group kernel takes 3 to 4 times
 * as long at 8 tokens and 3 times at 64 -- the signed decode and the float
 * step after each group, no staging of the activations, no k split.
 * Not understood yet: with GM_NT 2 a second process that loaded the
 * program from the program cache crashed (SIGSEGV before its first result,
 * in both calls that tried; BITNET_CACHE=0 ran), while with GM_NT 1 the
 * cached program loaded and ran. */
#define GM_MIN_TOKENS 4
#define GM_DEF_WM 4
#define GM_DEF_MT 1
#define GM_DEF_NT 1

int bn_ocl_mma_wanted(const bn_ocl_caps *caps, const bitnet_ternary_matrix *w, uint64_t tokens)
{
    const int group = w->kind == BITNET_SCALE_GROUP;
    if (group && w->group % BITNET_T2_BLOCK != 0) return 0;
    if (!caps->is_nvidia && !bn_ocl_env_on("BITNET_MMA_EMULATE")) return 0;
    if (bn_ocl_env_on("BITNET_OCL_PORTABLE")) return 0;
    const char *e = getenv("BITNET_MMA_MIN_TOKENS");
    uint64_t min = group ? GM_MIN_TOKENS : MMA_MIN_TOKENS;
    if (e && *e) {
        char *end;
        const unsigned long long v = strtoull(e, &end, 10);
        if (*end == '\0' && e[0] != '-') min = v;
    }
    return tokens >= min;
}

typedef struct {
    long wm, mt, nt, kb, st, kp; /* kp: host only (k parts over work-groups) */
} mma_geom;

/* Local memory of the kernel (bytes), as it declares it: MMA_ST stages of a
 * chunk's activations (128 bytes a token and block), or one round of the
 * epilogue's integer sums if more (rows + 4 ints a token, as many 8-token
 * tiles as the stages hold, at least one). */
static uint64_t mma_local_bytes(const mma_geom *gm, int emulate)
{
    const uint64_t rows = (uint64_t)(16 * gm->mt * gm->wm), cs = rows + 4, ntt = (uint64_t)gm->nt / 8;
    const uint64_t all = (uint64_t)gm->st * ((uint64_t)gm->kb / 2) * (uint64_t)gm->nt * 256;
    uint64_t ej = all / (8 * cs * 4);
    ej = ej < 1 ? 1 : ej > ntt ? ntt : ej;
    const uint64_t sums = (8 * ej * cs + 3) / 4 * 16;
    return (all > sums ? all : sums) + (emulate ? (uint64_t)(32 * 6 * 4) * (uint64_t)gm->wm : 0);
}

/* The shape's defaults (see the file header); kp 0: chosen at launch.
 * Passes of at most 32 tokens up to 64 tokens, of 64 above. */
static void mma_defaults(mma_geom *gm, uint64_t tokens)
{
    const uint64_t most = tokens > 64 ? 64 : MMA_MAX_NT;
    const uint64_t passes = (tokens + most - 1) / most;
    const uint64_t per = (tokens + passes - 1) / passes;
    *gm = (mma_geom){.wm = 4, .mt = 2, .nt = (long)((per + 7) / 8 * 8), .kb = 2, .st = 3, .kp = 0};
}

typedef struct {
    const char *name;
    size_t off;    /* of its long in the geometry struct */
    int host_only; /* read from BITNET_MMA_OPTS, never on the build line */
} mma_tunable;
static const mma_tunable mma_opts[] = {
    {"MMA_WM", offsetof(mma_geom, wm), 0}, {"MMA_MT", offsetof(mma_geom, mt), 0},
    {"MMA_NT", offsetof(mma_geom, nt), 0}, {"MMA_KB", offsetof(mma_geom, kb), 0},
    {"MMA_ST", offsetof(mma_geom, st), 0},
    {"MMA_KP", offsetof(mma_geom, kp), 1},
};
#define N_MMA_OPTS (sizeof mma_opts / sizeof mma_opts[0])

/* bl_mma_skinny's tunables (SK_DEF_* defaults, as in the kernel; SK_N from the token count) */
typedef struct {
    long w, t, a, n;
} sk_geom;
static const mma_tunable sk_opts[] = {
    {"SK_W", offsetof(sk_geom, w), 0}, {"SK_T", offsetof(sk_geom, t), 0}, {"SK_A", offsetof(sk_geom, a), 0},
    {"SK_N", offsetof(sk_geom, n), 0}};
#define N_SK_OPTS (sizeof sk_opts / sizeof sk_opts[0])

/* The build line of a tensor-core kernel into opts: each tunable of tab (a
 * long at its offset in geom, holding the default) is replaced by the value
 * BITNET_MMA_OPTS (eopts) names, else put on the line; eopts follows. */
static bitnet_status mma_build_opts(char *opts, size_t size, int emulate, const char *eopts, const mma_tunable *tab,
                                    size_t n, void *geom)
{
    int len = snprintf(opts, size, "-cl-fp32-correctly-rounded-divide-sqrt%s", emulate ? " -DMMA_EMULATE" : "");
    for (size_t i = 0; i < n && len >= 0 && (size_t)len < size; i++) {
        long *v = (long *)((char *)geom + tab[i].off);
        int found = 0;
        *v = bn_ocl_opt_value(eopts, tab[i].name, *v, &found);
        if (!found && !tab[i].host_only) len += snprintf(opts + len, size - (size_t)len, " -D%s=%ld", tab[i].name, *v);
    }
    if (len >= 0 && (size_t)len < size) len += snprintf(opts + len, size - (size_t)len, " %s", eopts);
    if (len < 0 || (size_t)len >= size) return bn_fail(BITNET_E_INVALID, "bitlinear: BITNET_MMA_OPTS too long");
    return BITNET_OK;
}

/* Refuses tunables whose local memory (bytes) the device lacks. */
static bitnet_status mma_local_fits(const bn_ocl_caps *caps, uint64_t lbytes)
{
    if (caps->local_mem && lbytes > caps->local_mem)
        return bn_fail(BITNET_E_INVALID, "bitlinear: mma tunables need %llu bytes of local memory, the device has %llu",
                       (unsigned long long)lbytes, (unsigned long long)caps->local_mem);
    return BITNET_OK;
}

/* k parts: none where the work-groups of one part already give every
 * compute unit one, else up to MMA_FILL per compute unit: of 1 to
 * ceil(MMA_FILL cu / groups) parts, the count with the fewest rounds of
 * work-groups on a compute unit per part (ceil(groups kp / cu) / kp; ties to
 * more parts: more warps hide more latency).  So 64 groups on 132 compute
 * units get 4 parts (two work-groups on every unit), not 5 (three on some,
 * two on others), and 128 groups 3 (the figures are in the header); each part at
 * least MMA_MIN_CHUNKS chunks, the parts' sums at most MMA_PART_BYTES.
 * From one work-group per compute unit on, bl_mma_sum (a second launch and
 * a pass over the parts' sums) cost more than the parts gained: H200,
 * 2026-11-27, the product's kernel time with two parts against one:
 * 16384x16384 at 64 tokens 117 against 103 us, 4096x14336 at 512 155
 * against 139 us, 4096x4096 at 512 76 against 59 us; 14336x4096 at 64
 * 31 us with one part against 30-31 + 9 (bl_mma_sum) with two.  Below one
 * per compute unit the parts win by far (4096x14336 at 64 tokens 42 us
 * with 5 against 65 with one; 16384x16384 at 8 tokens 48 with 3 against
 * 72).  More parts than the host's choice did not pay at 64 tokens (H100,
 * 2026-12-06, `SETTINGS="|-DMMA_KP=3|-DMMA_KP=4|-DMMA_KP=6|-DMMA_KP=8"
 * TOKENS=64 bash tests/device/mma-sweep.sh`, the host's choice and 4 parts
 * run twice, kernel medians of the product in us, the host's choice / 3 / 4
 * / 6 / 8 / one part): 4096x14336 45.3-45.4 / 56.4 / 49.4-49.5 / 49.1 /
 * 45.5 / 105.2; 14336x4096 54.2-54.6 / 54.4 / 61.9-62.3 / 63.5 / 71.2 /
 * 53.1; 16384x16384 112.1-112.6 / 110.6 / 141.5-142.2 / 122.4 / 134.2 /
 * 148.1; 4096x4096 35.3-35.6 / 37.4 / 34.7-35.0 / 36.8 / 35.5 / 47.5. */
#define MMA_FILL 2
#define MMA_MIN_CHUNKS 2
#define MMA_PART_BYTES ((uint64_t)64 << 20)
static uint64_t mma_parts(const bn_ocl_caps *caps, uint64_t groups, uint64_t chunks, uint64_t plane_bytes)
{
    const uint64_t cu = caps->compute_units ? caps->compute_units : 1, want = (uint64_t)MMA_FILL * cu;
    uint64_t kp = 1;
    if (groups < cu) { /* balanced waves: fewest rounds of work-groups per compute unit per part, ties to more parts */
        const uint64_t most = (want + groups - 1) / groups;
        for (uint64_t k = 2; k <= most; k++)
            if ((groups * k + cu - 1) / cu * kp <= (groups * kp + cu - 1) / cu * k) kp = k;
    }
    if (kp > chunks / MMA_MIN_CHUNKS) kp = chunks / MMA_MIN_CHUNKS;
    if (kp > MMA_PART_BYTES / plane_bytes) kp = MMA_PART_BYTES / plane_bytes;
    return kp ? kp : 1;
}

/* bl_mma_skinny, 2 to MMA_SKINNY_WIDE tokens: 16 * SK_T rows a work-group,
 * its SK_W warps splitting k, SK_A the next step's loads in flight (default:
 * where the work-groups are at most one per compute unit: sk_ahead above),
 * SK_N 8-token tiles a pass over the weights (default: all the tokens in
 * one). */
static bitnet_status mma_skinny(bn_ocl *o, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io, cl_mem bw,
                                cl_mem bx, cl_mem bs, cl_mem bd, cl_mem bb, cl_mem by, cl_mem bsum, cl_mem bres,
                                size_t nblocks, size_t xstride, int frag, const char *eopts, int emulate)
{
    const bn_ocl_caps *caps = bn_ocl_get_caps(o);
    /* one pass over the weights: as many 8-token tiles as the tokens need */
    sk_geom g = {SK_DEF_W, SK_DEF_T, 0, (long)((io->tokens + 7) / 8)};
    g.a = sk_ahead(caps, w->out, bn_ocl_opt_value(eopts, "SK_T", SK_DEF_T, NULL));
    char opts[768];
    bitnet_status st = mma_build_opts(opts, sizeof opts, emulate, eopts, sk_opts, N_SK_OPTS, &g);
    if (st) return st;
    if (frag) { /* the layout the activations were written in: not the caller's to set */
        const size_t len = strlen(opts);
        if (len + 10 >= sizeof opts) return bn_fail(BITNET_E_INVALID, "bitlinear: BITNET_MMA_OPTS too long");
        memcpy(opts + len, " -DSK_XF=1", 11);
    }
    const long nw = g.w, mt = g.t, a = g.a, nt = g.n;
    if (nw < 1 || nw > 32 || (caps->max_wg && (size_t)(32 * nw) > caps->max_wg) || mt < 1 || mt > 16 || a < 0 ||
        a > 1 || nt < 1 || nt > 4)
        return bn_fail(BITNET_E_INVALID,
                       "bitlinear: mma tunables out of range for 2 to %d tokens (SK_W %ld warps: 32 work-items "
                       "each, at most %zu; SK_T %ld: 1..16; SK_A %ld: 0..1; SK_N %ld: 1..4)",
                       MMA_SKINNY_WIDE, nw, caps->max_wg, mt, a, nt);
    /* red[] of the warps' tiles, and the emulation's scratch */
    const uint64_t lbytes =
        (uint64_t)nw * (uint64_t)mt * (uint64_t)nt * 512 + (emulate ? (uint64_t)(32 * 6 * 4) * (uint64_t)nw : 0);
    if ((st = mma_local_fits(caps, lbytes))) return st;
    const uint64_t rows = 16 * (uint64_t)mt, groups = (w->out + rows - 1) / rows;
    if (groups > SIZE_MAX / 32) return bn_fail(BITNET_E_LIMIT, "bitlinear: too many rows for one launch");
    cl_kernel k;
    if ((st = bn_ocl_kernel(o, "bitlinear", "bl_mma_skinny", opts, &k))) return st;
    const cl_int per_row = w->kind == BITNET_SCALE_ROW, has_bias = io->bias != NULL, act = (cl_int)io->act;
    const cl_ulong c_out = w->out, c_tok = io->tokens, c_nblocks = nblocks, c_xstride = xstride;
    const cl_long perturb = bn_test_perturb("bitlinear") && !io->yq ? 0 : -1;
    st = bn_ocl_args(o, k, 15, sizeof bw, &bw, sizeof bx, &bx, sizeof bs, &bs, sizeof bd, &bd, sizeof per_row, &per_row,
                     sizeof bb, &bb, sizeof has_bias, &has_bias, sizeof act, &act, sizeof by, &by, sizeof c_out, &c_out,
                     sizeof c_tok, &c_tok, sizeof c_nblocks, &c_nblocks, sizeof c_xstride, &c_xstride, sizeof perturb,
                     &perturb, sizeof bsum, &bsum);
    if (!st) st = bn_ocl_bl_res_args(o, k, 15, bres, io->residual != NULL);
    const size_t local[2] = {32, (size_t)nw}, global[2] = {32 * (size_t)groups, (size_t)nw};
    if (!st) st = bn_ocl_run(o, k, 2, global, local, "bitlinear");
    return st;
}

/* bl_group_mma's tunables (GM_DEF_* defaults, as in the kernel) */
typedef struct {
    long wm, mt, nt;
} gm_geom;
static const mma_tunable gm_opts[] = {
    {"GM_WM", offsetof(gm_geom, wm), 0}, {"GM_MT", offsetof(gm_geom, mt), 0}, {"GM_NT", offsetof(gm_geom, nt), 0}};
#define N_GM_OPTS (sizeof gm_opts / sizeof gm_opts[0])

/* bl_group_mma: GM_WM warps a work-group along the rows, each 16 * GM_MT
 * rows and 8 * GM_NT tokens, all the groups of its rows in order. */
static bitnet_status mma_group(bn_ocl *o, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io, cl_mem bw,
                               cl_mem bx, cl_mem bs, cl_mem bd, cl_mem bb, cl_mem by, cl_mem bres, size_t nblocks,
                               size_t xstride, const char *eopts, int emulate)
{
    const bn_ocl_caps *caps = bn_ocl_get_caps(o);
    gm_geom g = {GM_DEF_WM, GM_DEF_MT, GM_DEF_NT};
    char opts[768];
    bitnet_status st = mma_build_opts(opts, sizeof opts, emulate, eopts, gm_opts, N_GM_OPTS, &g);
    if (st) return st;
    if (g.wm < 1 || g.wm > 32 || (caps->max_wg && (size_t)(32 * g.wm) > caps->max_wg) || g.mt < 1 || g.mt > 8 ||
        g.nt < 1 || g.nt > 8)
        return bn_fail(BITNET_E_INVALID,
                       "bitlinear: mma tunables out of range for group scales (GM_WM %ld warps: 32 work-items each, "
                       "at most %zu; GM_MT %ld: 1..8; GM_NT %ld: 1..8)",
                       g.wm, caps->max_wg, g.mt, g.nt);
    const uint64_t lbytes = emulate ? (uint64_t)(32 * 6 * 4) * (uint64_t)g.wm : 0;
    if ((st = mma_local_fits(caps, lbytes))) return st;
    const uint64_t rows = 16 * (uint64_t)g.mt * (uint64_t)g.wm, groups = (w->out + rows - 1) / rows;
    const uint64_t ntok = 8 * (uint64_t)g.nt;
    uint64_t tp = (io->tokens + ntok - 1) / ntok; /* token passes along dimension 1; the kernel loops past the grid */
    if (tp > MMA_MAX_GRID) tp = MMA_MAX_GRID;
    if (groups > SIZE_MAX / 32) return bn_fail(BITNET_E_LIMIT, "bitlinear: too many rows for one launch");
    cl_kernel k;
    if ((st = bn_ocl_kernel(o, "bitlinear", "bl_group_mma", opts, &k))) return st;
    const cl_uint c_group = w->group;
    const cl_int has_bias = io->bias != NULL, act = (cl_int)io->act;
    const cl_ulong c_out = w->out, c_tok = io->tokens, c_nblocks = nblocks, c_xstride = xstride;
    const cl_long perturb = bn_test_perturb("bitlinear") && !io->yq ? 0 : -1;
    st = bn_ocl_args(o, k, 14, sizeof bw, &bw, sizeof bx, &bx, sizeof bs, &bs, sizeof bd, &bd, sizeof c_group, &c_group,
                     sizeof bb, &bb, sizeof has_bias, &has_bias, sizeof act, &act, sizeof by, &by, sizeof c_out, &c_out,
                     sizeof c_tok, &c_tok, sizeof c_nblocks, &c_nblocks, sizeof c_xstride, &c_xstride, sizeof perturb,
                     &perturb);
    if (!st) st = bn_ocl_bl_res_args(o, k, 14, bres, io->residual != NULL);
    const size_t local[2] = {32, (size_t)g.wm}, global[2] = {32 * (size_t)groups, (size_t)g.wm * (size_t)tp};
    if (!st) st = bn_ocl_run(o, k, 2, global, local, "bitlinear");
    return st;
}

bitnet_status bn_ocl_bitlinear_mma(bn_ocl *o, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io, cl_mem bw,
                                   cl_mem bx, cl_mem bs, cl_mem bd, cl_mem bb, cl_mem by, cl_mem bsum, cl_mem bres,
                                   size_t nblocks, size_t xstride, int frag)
{
    const bn_ocl_caps *caps = bn_ocl_get_caps(o);
    const int emulate = !caps->is_nvidia || bn_ocl_env_on("BITNET_MMA_EMULATE");
    const char *eopts = getenv("BITNET_MMA_OPTS");
    if (!eopts) eopts = "";
    if (w->kind == BITNET_SCALE_GROUP)
        return mma_group(o, w, io, bw, bx, bs, bd, bb, by, bres, nblocks, xstride, eopts, emulate);
    mma_geom gm;
    mma_defaults(&gm, io->tokens);

    /* the tunables: BITNET_MMA_OPTS where it names them, else ours on the
     * command line; checked before either kernel is built, since one
     * program holds both (bl_gemm_mma's #error would fail the build) */
    char opts[768];
    bitnet_status st = mma_build_opts(opts, sizeof opts, emulate, eopts, mma_opts, N_MMA_OPTS, &gm);
    if (st) return st;

    const long nw = gm.wm;
    if (gm.nt < 8 || gm.nt % 8 || gm.nt > 1024 || gm.kb < 2 || gm.kb % 2 || gm.kb > 256 || gm.wm < 1 || gm.wm > 32 ||
        (caps->max_wg && (size_t)(32 * nw) > caps->max_wg) || gm.mt < 1 || gm.mt > 16 || gm.st < 2 || gm.st > 4 ||
        gm.kp < 0 || gm.kp > MMA_MAX_GRID)
        return bn_fail(BITNET_E_INVALID,
                       "bitlinear: mma tunables out of range (MMA_NT %ld: a multiple of 8; MMA_KB %ld: even; "
                       "MMA_WM %ld warps: 32 work-items each, at most %zu; MMA_MT %ld: 1..16; MMA_ST %ld: 2..4; "
                       "MMA_KP %ld: 0 (chosen) to %d)",
                       gm.nt, gm.kb, gm.wm, caps->max_wg, gm.mt, gm.st, gm.kp, MMA_MAX_GRID);
    if (mma_takes_skinny(w, io->tokens))
        return mma_skinny(o, w, io, bw, bx, bs, bd, bb, by, bsum, bres, nblocks, xstride, frag, eopts, emulate);
    const uint64_t lbytes = mma_local_bytes(&gm, emulate);
    if ((st = mma_local_fits(caps, lbytes))) return st;

    /* the grid: token passes (0) x k parts (1) x row tiles (2); the kernel
     * loops past MMA_MAX_GRID of either */
    const uint64_t T = io->tokens, out = w->out;
    const uint64_t mr = (uint64_t)(16 * gm.mt * gm.wm), nrt = (out + mr - 1) / mr;
    uint64_t tb = (T + (uint64_t)gm.nt - 1) / (uint64_t)gm.nt;
    if (tb > MMA_MAX_GRID) tb = MMA_MAX_GRID;
    const uint64_t nrg = nrt > MMA_MAX_GRID ? MMA_MAX_GRID : nrt;
    const uint64_t nsc = (uint64_t)gm.kb / 2, nsb = ((uint64_t)nblocks + 1) / 2, chunks = (nsb + nsc - 1) / nsc;
    const uint64_t plane = T * out; /* fits: it is the float output's element count */
    uint64_t kp = gm.kp ? (uint64_t)gm.kp : mma_parts(caps, nrt * tb, chunks, plane * sizeof(cl_int));
    const uint64_t spp = (chunks + kp - 1) / kp * nsc; /* super-blocks per part, whole chunks (nsb >= 1) */
    kp = (nsb + spp - 1) / spp;                        /* no empty parts */
    if (kp > SIZE_MAX / (size_t)nw || (kp > 1 && plane > SIZE_MAX / sizeof(cl_int) / kp))
        return bn_fail(BITNET_E_LIMIT, "bitlinear: too many rows for one launch");

    cl_kernel k, ks = NULL;
    if ((st = bn_ocl_kernel(o, "bitlinear", "bl_gemm_mma", opts, &k))) return st;
    if (kp > 1 && (st = bn_ocl_kernel(o, "bitlinear", "bl_mma_sum", opts, &ks))) return st;
    bn_ocl_arg ap = {0};
    if (kp > 1 && (st = bn_ocl_scratch(o, (size_t)(kp * plane) * sizeof(cl_int), &ap))) return st;
    cl_mem bp = kp > 1 ? ap.m : by; /* unused with one part */
    const cl_int per_row = w->kind == BITNET_SCALE_ROW, has_bias = io->bias != NULL, act = (cl_int)io->act;
    const cl_ulong c_out = out, c_tok = T, c_nblocks = nblocks, c_xstride = xstride, c_spp = spp;
    const cl_long perturb = bn_test_perturb("bitlinear") && !io->yq ? 0 : -1;
    st = bn_ocl_args(o, k, 17, sizeof bw, &bw, sizeof bx, &bx, sizeof bs, &bs, sizeof bd, &bd, sizeof per_row, &per_row,
                     sizeof bb, &bb, sizeof has_bias, &has_bias, sizeof act, &act, sizeof by, &by, sizeof c_out, &c_out,
                     sizeof c_tok, &c_tok, sizeof c_nblocks, &c_nblocks, sizeof c_xstride, &c_xstride, sizeof perturb,
                     &perturb, sizeof bsum, &bsum, sizeof bp, &bp, sizeof c_spp, &c_spp);
    if (!st) st = bn_ocl_bl_res_args(o, k, 17, bres, io->residual != NULL);
    const size_t local[3] = {32, (size_t)nw, 1}, global[3] = {32 * (size_t)tb, (size_t)nw * (size_t)kp, (size_t)nrg};
    if (!st) st = bn_ocl_run(o, k, 3, global, local, "bitlinear");
    if (!st && kp > 1) {
        const cl_int c_kp = (cl_int)kp;
        const size_t sl = bn_tops_wg(o, ks, 256), sg = bn_tops_round(plane, sl);
        st = bn_ocl_args(o, ks, 13, sizeof bp, &bp, sizeof c_kp, &c_kp, sizeof bs, &bs, sizeof bd, &bd,
                         sizeof per_row, &per_row, sizeof bb, &bb, sizeof has_bias, &has_bias, sizeof act, &act,
                         sizeof by, &by, sizeof c_out, &c_out, sizeof c_tok, &c_tok, sizeof perturb, &perturb,
                         sizeof bsum, &bsum);
        if (!st) st = bn_ocl_bl_res_args(o, ks, 13, bres, io->residual != NULL);
        if (!st) st = bn_ocl_run(o, ks, 1, &sg, &sl, "bitlinear");
    }
    return bn_ocl_done(o, &ap, st);
}
