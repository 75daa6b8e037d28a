/* cmd_version.c - `nightshift version`: what this binary is (version,
 * revision, build type, compiler) and the versions of the libraries it
 * runs with, as loaded at run time, for bug reports. */
#include "cli.h"

#include "nightshift/mp.h"

#include <jansson.h>
#include <lmdb.h>
#include <microhttpd.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define CL_USE_DEPRECATED_OPENCL_1_1_APIS /* clGetExtensionFunctionAddress */
#include <CL/cl.h>

static const char s_usage[] =
    "usage: nightshift version [--json]\n"
    "\n"
    "Print the version of nightshift, the source revision and build type\n"
    "it was built from, and the versions of the libraries it runs with\n"
    "(as loaded now: libzmq, libsodium, LMDB, msgpack-c, the OpenCL ICD\n"
    "loader, jansson, libmicrohttpd). `nightshift --version` prints the\n"
    "first line only.\n"
    "  --json    one object: version, revision, build_type, compiler and\n"
    "            libraries (name to version)\n";

/* The ICD loader's own version, through the loader-info extension that
 * ocl-icd and the Khronos loader both offer ("OCL Icd free software
 * 2.3.1"); "unknown" from a loader without it. */
static void s_icd_version(char *out, size_t cap)
{
    typedef cl_int (*info_fn)(cl_uint, size_t, void *, size_t *);
    enum { ICDL_OCL_VERSION = 1, ICDL_VERSION = 2, ICDL_VENDOR = 4 };
    info_fn f =
        (info_fn)clGetExtensionFunctionAddress("clGetICDLoaderInfoOCLICD");
    char vendor[96] = "", version[32] = "", ocl[32] = "";
    if (!f ||
        f(ICDL_VERSION, sizeof version - 1, version, NULL) != CL_SUCCESS) {
        snprintf(out, cap, "unknown");
        return;
    }
    if (f(ICDL_VENDOR, sizeof vendor - 1, vendor, NULL) != CL_SUCCESS)
        vendor[0] = '\0';
    if (f(ICDL_OCL_VERSION, sizeof ocl - 1, ocl, NULL) != CL_SUCCESS)
        ocl[0] = '\0';
    snprintf(out, cap, "%s%s%s%s%s%s", version, vendor[0] ? " (" : "", vendor,
             vendor[0] && ocl[0] ? ", " : "", ocl, vendor[0] ? ")" : "");
}

#define N_LIBS 7

int ns_cmd_version(int argc, char **argv)
{
    const char *cmd = "version";
    int json = 0;
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            ns_cli_error(cmd, "unknown argument '%s' (see --help)", argv[i]);
            return 2;
        }
    }
    char zmq[32], lmdb[32], mhd[32], icd[160];
    int ma, mi, pa;
    zmq_version(&ma, &mi, &pa);
    snprintf(zmq, sizeof zmq, "%d.%d.%d", ma, mi, pa);
    mdb_version(&ma, &mi, &pa);
    snprintf(lmdb, sizeof lmdb, "%d.%d.%d", ma, mi, pa);
    snprintf(mhd, sizeof mhd, "%s", MHD_get_version());
    s_icd_version(icd, sizeof icd);
    const char *const libs[N_LIBS][2] = {
        {"libzmq", zmq},        {"libsodium", sodium_version_string()},
        {"lmdb", lmdb},         {"msgpack-c", msgpack_version()},
        {"opencl-icd", icd},    {"jansson", jansson_version_str()},
        {"libmicrohttpd", mhd},
    };
#if defined(__clang__)
    const char *compiler = __VERSION__; /* "Clang 14.0.6" */
#elif defined(__GNUC__)
    const char *compiler = "gcc " __VERSION__;
#else
    const char *compiler = "unknown";
#endif
    if (!json) {
        printf("nightshift %s\n", NS_VERSION_STRING);
        printf("revision   %s\n", ns_build_revision);
        printf("build      %s\n", ns_build_type);
        printf("compiler   %s\n", compiler);
        printf("libraries\n");
        for (int i = 0; i < N_LIBS; i++)
            printf("  %-14s %s\n", libs[i][0], libs[i][1]);
        return 0;
    }
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    ns_mp_str(&pk, "version");
    ns_mp_str(&pk, NS_VERSION_STRING);
    ns_mp_str(&pk, "revision");
    ns_mp_str(&pk, ns_build_revision);
    ns_mp_str(&pk, "build_type");
    ns_mp_str(&pk, ns_build_type);
    ns_mp_str(&pk, "compiler");
    ns_mp_str(&pk, compiler);
    ns_mp_str(&pk, "libraries");
    msgpack_pack_map(&pk, N_LIBS);
    for (int i = 0; i < N_LIBS; i++) {
        ns_mp_str(&pk, libs[i][0]);
        ns_mp_str(&pk, libs[i][1]);
    }
    int rc = ns_cli_print_json(sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}
