/*
 * blas.h - CLBlast on the OpenCL backend's queue (internal): errors and timing.
 *
 *   cl_event mark, ev = NULL;
 *   if ((st = bn_blas_begin(o, &mark))) ...
 *   CLBlastStatusCode c = CLBlastSgemm(..., bn_blas_queue(o), &ev);
 *   if (c) { bn_blas_end(o, mark, ev, op); return BN_BLAS_FAIL(c, "CLBlastSgemm"); }
 *   st = bn_blas_end(o, mark, ev, op);      with profiling on: waits for ev, adds the time to
 *                                           op's kernel time; else returns at once
 */
#ifndef BITNET_OCL_BLAS_H
#define BITNET_OCL_BLAS_H

#include "ocl.h"

#include <clblast_c.h>

const char *bn_blas_errname(CLBlastStatusCode c); /* NULL for codes shared with OpenCL */
bitnet_status bn_blas_fail(CLBlastStatusCode c, const char *call, const char *file, int line);
#define BN_BLAS_FAIL(c, call) bn_blas_fail((c), (call), __FILE__, __LINE__)
bitnet_status bn_blas_begin(bn_ocl *o, cl_event *mark);
bitnet_status bn_blas_end(bn_ocl *o, cl_event mark, cl_event last, const char *op);
cl_command_queue *bn_blas_queue(bn_ocl *o);

#endif
