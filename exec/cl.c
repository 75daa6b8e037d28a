/* cl.c - device lookup, context and queue creation, error names: the
 * OpenCL plumbing shared by the runner, devbench and challenges (cl.h).
 */
/* clCreateCommandQueue for OpenCL 1.x platforms, which lack the 2.0 call. */
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include "nightshift/cl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ns_cl_errname(cl_int e)
{
    switch (e) {
    case CL_SUCCESS:
        return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND:
        return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE:
        return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE:
        return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
        return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES:
        return "CL_OUT_OF_RESOURCES";
    case CL_INVALID_COMMAND_QUEUE:
        return "CL_INVALID_COMMAND_QUEUE";
    case CL_OUT_OF_HOST_MEMORY:
        return "CL_OUT_OF_HOST_MEMORY";
    case CL_PROFILING_INFO_NOT_AVAILABLE:
        return "CL_PROFILING_INFO_NOT_AVAILABLE";
    case CL_BUILD_PROGRAM_FAILURE:
        return "CL_BUILD_PROGRAM_FAILURE";
    case CL_MAP_FAILURE:
        return "CL_MAP_FAILURE";
    case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
        return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    case CL_INVALID_VALUE:
        return "CL_INVALID_VALUE";
    case CL_INVALID_DEVICE:
        return "CL_INVALID_DEVICE";
    case CL_INVALID_BINARY:
        return "CL_INVALID_BINARY";
    case CL_INVALID_BUILD_OPTIONS:
        return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_PROGRAM_EXECUTABLE:
        return "CL_INVALID_PROGRAM_EXECUTABLE";
    case CL_INVALID_KERNEL_NAME:
        return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_DEFINITION:
        return "CL_INVALID_KERNEL_DEFINITION";
    case CL_INVALID_ARG_INDEX:
        return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_VALUE:
        return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_SIZE:
        return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_KERNEL_ARGS:
        return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_DIMENSION:
        return "CL_INVALID_WORK_DIMENSION";
    case CL_INVALID_WORK_GROUP_SIZE:
        return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE:
        return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_GLOBAL_OFFSET:
        return "CL_INVALID_GLOBAL_OFFSET";
    case CL_INVALID_BUFFER_SIZE:
        return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE:
        return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_HOST_PTR:
        return "CL_INVALID_HOST_PTR";
    case CL_INVALID_MEM_OBJECT:
        return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_OPERATION:
        return "CL_INVALID_OPERATION";
    default:
        return "CL_ERROR";
    }
}

void ns_cl_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int ns_cl_fail(char *err, size_t errlen, const char *what, cl_int e)
{
    ns_cl_errf(err, errlen, "%s: %s (%d)", what, ns_cl_errname(e), (int)e);
    return NS_ERR_OPENCL;
}

/* Major version from "OpenCL <major>.<minor> ...", 1 if unreadable. */
static int s_version_major(const char *version)
{
    static const char prefix[] = "OpenCL ";
    if (strncmp(version, prefix, sizeof prefix - 1) != 0)
        return 1;
    int major = atoi(version + sizeof prefix - 1);
    return major >= 1 ? major : 1;
}

int ns_cl_device_find(uint32_t platform_index, uint32_t device_index,
                      cl_device_id *id, int *platform_major)
{
    cl_platform_id *plats = NULL;
    cl_device_id *devs = NULL;
    cl_uint np = 0, nd = 0;
    char version[NS_MAX_DEVICE_NAME + 1];
    int rc = NS_ERR_NOTFOUND;

    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || platform_index >= np)
        goto out;
    plats = calloc(np, sizeof *plats);
    if (!plats) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    if (clGetPlatformIDs(np, plats, &np) != CL_SUCCESS || platform_index >= np)
        goto out;
    cl_platform_id plat = plats[platform_index];
    if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS ||
        device_index >= nd)
        goto out;
    devs = calloc(nd, sizeof *devs);
    if (!devs) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, nd, devs, &nd) != CL_SUCCESS ||
        device_index >= nd)
        goto out;
    if (platform_major) {
        memset(version, 0, sizeof version);
        if (clGetPlatformInfo(plat, CL_PLATFORM_VERSION, sizeof version - 1,
                              version, NULL) != CL_SUCCESS)
            version[0] = '\0';
        *platform_major = s_version_major(version);
    }
    *id = devs[device_index];
    rc = NS_OK;
out:
    /* platform and root device ids are not reference-counted objects */
    free(devs);
    free(plats);
    return rc;
}

int ns_cl_device_at(uint32_t index, ns_device_t *dev, cl_device_id *id,
                    int *platform_major)
{
    uint32_t n = 0;
    /* NS_MAX_DEVICES entries of ~1 KiB each: not on the stack */
    ns_device_t *devs = calloc(NS_MAX_DEVICES, sizeof *devs);
    int rc = NS_ERR_NOMEM;

    if (!devs)
        goto out;
    rc = ns_devices_probe(devs, NS_MAX_DEVICES, &n);
    if (rc != NS_OK)
        goto out;
    rc = NS_ERR_NOTFOUND;
    if (index >= n)
        goto out;
    rc = ns_cl_device_find(devs[index].platform_index, devs[index].device_index,
                           id, platform_major);
    if (rc == NS_OK && dev)
        *dev = devs[index];
out:
    free(devs);
    return rc;
}

int ns_cl_context_queue(cl_device_id dev, int api_major,
                        cl_command_queue_properties props, cl_context *ctx,
                        cl_command_queue *queue, cl_int *cl_err,
                        const char **call)
{
    cl_int e = CL_SUCCESS;
    const char *what = "clCreateContext";

    *queue = NULL;
    *ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    if (!*ctx)
        goto fail;
    what = "clCreateCommandQueue";
    if (api_major >= 2) {
        const cl_queue_properties list[] = {CL_QUEUE_PROPERTIES, props, 0};
        *queue = clCreateCommandQueueWithProperties(*ctx, dev,
                                                    props ? list : NULL, &e);
    } else {
        *queue = clCreateCommandQueue(*ctx, dev, props, &e);
    }
    if (!*queue)
        goto fail;
    return NS_OK;
fail:
    if (*ctx)
        clReleaseContext(*ctx);
    *ctx = NULL;
    if (cl_err)
        *cl_err = e;
    if (call)
        *call = what;
    return NS_ERR_OPENCL;
}
