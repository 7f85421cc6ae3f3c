/*
 * blas.c - CLBlast on the backend's queue: CLBlast status codes turned into
 * library statuses (call, file, line), and the timing of a CLBlast routine
 * as one kernel of an op.  A CLBlast routine may run several kernels (a GEMM
 * pads or transposes its operands first) and returns the event of the last
 * one only, so the time runs from a marker enqueued before the routine to
 * the end of that event; the queue is in order.
 */
#include "blas.h"
#include "ocl_impl.h"

#include <stdio.h>

const char *bn_blas_errname(CLBlastStatusCode c)
{
    switch (c) {
    case CLBlastNotImplemented: return "CLBlastNotImplemented";
    case CLBlastInvalidDimension: return "CLBlastInvalidDimension";
    case CLBlastInsufficientMemoryA: return "CLBlastInsufficientMemoryA";
    case CLBlastInsufficientMemoryB: return "CLBlastInsufficientMemoryB";
    case CLBlastInsufficientMemoryC: return "CLBlastInsufficientMemoryC";
    case CLBlastInsufficientMemoryX: return "CLBlastInsufficientMemoryX";
    case CLBlastInsufficientMemoryY: return "CLBlastInsufficientMemoryY";
    case CLBlastInvalidLocalMemUsage: return "CLBlastInvalidLocalMemUsage";
    case CLBlastNoDoublePrecision: return "CLBlastNoDoublePrecision";
    case CLBlastDatabaseError: return "CLBlastDatabaseError";
    case CLBlastUnknownError: return "CLBlastUnknownError";
    case CLBlastUnexpectedError: return "CLBlastUnexpectedError";
    default: return NULL;
    }
}

bitnet_status bn_blas_fail(CLBlastStatusCode c, const char *call, const char *file, int line)
{
    if (c > -1000) return bn_cl_fail((cl_int)c, call, file, line); /* the OpenCL codes */
    const char *name = bn_blas_errname(c);
    if (c == CLBlastNoDoublePrecision)
        return bn_fail(BITNET_E_UNSUPPORTED, "%s: the device has no double precision (%s)", call, name);
    if (name) return bn_fail(BITNET_E_DEVICE, "%s failed: %s (%s:%d)", call, name, file, line);
    return bn_fail(BITNET_E_DEVICE, "%s failed: CLBlast status %d (%s:%d)", call, (int)c, file, line);
}

bitnet_status bn_blas_begin(bn_ocl *o, cl_event *mark)
{
    *mark = NULL;
    if (bn_test_fail("run"))
        return bn_cl_fail_test(CL_OUT_OF_RESOURCES, "CLBlast routine", __FILE__, __LINE__);
    if (!bn_ocl_profiling(o)) return BITNET_OK; /* the marker only times the routine */
    cl_int err = clEnqueueMarkerWithWaitList(o->queue, 0, NULL, mark);
    if (err != CL_SUCCESS) return bn_cl_fail(err, "clEnqueueMarkerWithWaitList(queue, ...)", __FILE__, __LINE__);
    return BITNET_OK;
}

bitnet_status bn_blas_end(bn_ocl *o, cl_event mark, cl_event last, const char *op)
{
    cl_int err = CL_SUCCESS;
    /* the routine is timed only with profiling on; otherwise it runs on in
     * order with the ops after it, and the host waits where it reads */
    const int timed = last && bn_ocl_profiling(o);
    if (timed) err = clWaitForEvents(1, &last);
    if (err == CL_SUCCESS && timed) {
        cl_ulong t0 = 0, t1 = 0;
        /* the marker's end is when every earlier command had finished */
        if ((!mark || clGetEventProfilingInfo(mark, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL) != CL_SUCCESS ||
             t0 == 0) &&
            clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) != CL_SUCCESS)
            t0 = 0;
        if (t0 && clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS &&
            t1 >= t0) {
            o->last_kernel_ms = (double)(t1 - t0) / 1e6;
            if (o->host.kernel_time) o->host.kernel_time(o->host.user, op, o->last_kernel_ms);
        }
    }
    if (mark) clReleaseEvent(mark);
    if (last) clReleaseEvent(last);
    if (err != CL_SUCCESS) return bn_cl_fail(err, "clWaitForEvents(1, &event)", __FILE__, __LINE__);
    return BITNET_OK;
}

cl_command_queue *bn_blas_queue(bn_ocl *o) { return &o->queue; }
