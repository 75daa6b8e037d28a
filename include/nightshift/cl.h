/* cl.h - the OpenCL plumbing the exec modules share (exec layer): finding
 * a device by its index, creating its context and command queue, and
 * naming OpenCL error codes.
 *
 * The runner, the device benchmark and the hardware challenges each open a
 * device of their own; they all find it and set it up here, so an ICD quirk
 * is handled once. Only exec/ includes this header (it pulls in CL/cl.h);
 * the layers above see devices through devices.h, runner.h and worker.h.
 *
 * Device ids from these functions are root devices: not reference-counted,
 * nothing to release. Contexts and queues are the caller's: release the
 * queue, then the context (clReleaseCommandQueue, clReleaseContext).
 *
 * Like the rest of OpenCL these load the driver into the calling process;
 * see devices.h for why the node never does that itself.
 */
#ifndef NIGHTSHIFT_CL_H
#define NIGHTSHIFT_CL_H

#include "nightshift/devices.h"
#include "nightshift/err.h"

#include <CL/cl.h>

#include <stddef.h>
#include <stdint.h>

/* The name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), "CL_ERROR" for
 * a code without one here. Static text, never NULL. */
const char *ns_cl_errname(cl_int e);

/* Format a one-line reason into err[errlen], the (err, errlen) out-
 * parameter of the exec calls. Does nothing when err is NULL or errlen 0;
 * the text is truncated to fit. */
void ns_cl_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A failed OpenCL call: err gets "what: NAME (code)" and the return value
 * is NS_ERR_OPENCL, so a caller writes `return ns_cl_fail(...)`. */
int ns_cl_fail(char *err, size_t errlen, const char *what, cl_int e);

/* Device device_index of platform platform_index (the positions in
 * clGetPlatformIDs and clGetDeviceIDs(CL_DEVICE_TYPE_ALL), as
 * ns_devices_probe fills them). *platform_major, if not NULL, gets the
 * platform's OpenCL major version ("OpenCL 3.0 ..." -> 3; 1 when the
 * version text is unreadable), which says whether the 2.0 entry points
 * exist. NS_ERR_NOTFOUND when either index is past the end or the loader
 * fails, NS_ERR_NOMEM. */
int ns_cl_device_find(uint32_t platform_index, uint32_t device_index,
                      cl_device_id *id, int *platform_major) NS_MUST_CHECK;

/* Device number index in ns_devices_probe order: probes, then
 * ns_cl_device_find on its platform and device positions. *dev, if not
 * NULL, gets the probe's entry for it. Errors of ns_devices_probe
 * (NS_ERR_OPENCL), NS_ERR_NOTFOUND (no such device), NS_ERR_NOMEM. */
int ns_cl_device_at(uint32_t index, ns_device_t *dev, cl_device_id *id,
                    int *platform_major) NS_MUST_CHECK;

/* A context on dev alone and an in-order command queue with the given
 * properties (0 or CL_QUEUE_PROFILING_ENABLE). api_major picks the queue
 * entry point: clCreateCommandQueue below 2 (OpenCL 1.x has no other),
 * clCreateCommandQueueWithProperties from 2 on. On NS_OK the caller owns
 * *ctx and *queue. On NS_ERR_OPENCL both are NULL (nothing to release),
 * *cl_err gets the OpenCL code and *call the name of the call that failed
 * ("clCreateContext", "clCreateCommandQueue"); either may be NULL. */
int ns_cl_context_queue(cl_device_id dev, int api_major,
                        cl_command_queue_properties props, cl_context *ctx,
                        cl_command_queue *queue, cl_int *cl_err,
                        const char **call) NS_MUST_CHECK;

#endif
