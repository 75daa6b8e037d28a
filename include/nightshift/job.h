/* job.h - the job descriptor shared by exec/ (which runs it) and the
 * market (which prices, gossips and records it). Core layer: no OpenCL.
 *
 * A job is one OpenCL NDRange launch: a kernel (OpenCL C source, or the
 * name of a built-in from kernels/), an entry point, build options from an
 * allow-list, an NDRange of 1-3 dimensions, and its arguments in order.
 *
 * Items: the output is cut into items, the unit of commitment and of
 * spot-checks. An item is one work-item (item_kind WORK_ITEM) or one
 * work-group (WORK_GROUP, for kernels that share local memory). Items are
 * numbered row-major over the NDRange (x fastest). Every output buffer
 * declares item_bytes; its size must be n_items * item_bytes, and item i
 * owns bytes [i * item_bytes, (i + 1) * item_bytes) of it: the kernel must
 * write exactly there (built-ins do: out[get_global_id(0)]...). An item's
 * output is the concatenation of its slices of every output buffer, in
 * argument order. Re-running item i means launching the same kernel with
 * a global offset at item i's position and a global size of one item.
 */
#ifndef NIGHTSHIFT_JOB_H
#define NIGHTSHIFT_JOB_H

#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/mp.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#define NS_MAX_SOURCE (1024 * 1024)      /* kernel source bytes */
#define NS_MAX_ARGS 32                   /* kernel arguments */
#define NS_MAX_ENTRY 63                  /* entry point name */
#define NS_MAX_BUILTIN 31                /* built-in kernel name */
#define NS_MAX_OPTIONS 255               /* build options text */
#define NS_MAX_BUFFER (UINT64_C(4) << 30) /* one buffer, bytes */
#define NS_MAX_JOB_BYTES (UINT64_C(16) << 30) /* all buffers together */
#define NS_MAX_WORK_ITEMS (UINT64_C(1) << 32) /* global size product */
#define NS_MAX_LOCAL_ITEMS 1024          /* local size product */
#define NS_MAX_ITEM_BYTES (1024 * 1024)  /* output bytes per item */
#define NS_MAX_CHECKS 4096               /* spot-checks k */
#define NS_MAX_JOB_MSG (NS_MAX_SOURCE + 8192) /* encoded descriptor */

typedef enum {
    NS_ARG_IN = 1,    /* input buffer: size and content hash */
    NS_ARG_OUT = 2,   /* output buffer: size and item_bytes */
    NS_ARG_U32 = 3,
    NS_ARG_I32 = 4,
    NS_ARG_U64 = 5,
    NS_ARG_I64 = 6,
    NS_ARG_F32 = 7,
    NS_ARG_F64 = 8,
    NS_ARG_LOCAL = 9, /* __local memory of size bytes */
} ns_arg_kind;

typedef struct {
    uint8_t kind;        /* ns_arg_kind */
    uint64_t size;       /* bytes: IN, OUT, LOCAL */
    uint32_t item_bytes; /* OUT: bytes each item owns */
    ns_hash_t hash;      /* IN: BLAKE2b-256 of the content */
    union {
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
    } v; /* scalars */
} ns_arg_t;

typedef enum {
    NS_DET_EXACT = 0, /* outputs compared byte for byte */
    NS_DET_ULP = 1,   /* float32 values within tol units in the last place */
    NS_DET_ABS = 2,   /* |a - b| <= tol (float32 values) */
    NS_DET_REL = 3,   /* |a - b| <= tol * max(|a|, |b|) (float32) */
} ns_det_class;

typedef enum {
    NS_ITEM_WORK_ITEM = 0,
    NS_ITEM_WORK_GROUP = 1,
} ns_item_kind;

typedef struct {
    char builtin[NS_MAX_BUILTIN + 1]; /* "" when source is given */
    uint8_t *source;                  /* OpenCL C, owned; NULL for built-in */
    size_t source_len;
    ns_hash_t source_hash;            /* hash of the source actually run
                                         (built-ins: of the embedded text) */
    char entry[NS_MAX_ENTRY + 1];
    char options[NS_MAX_OPTIONS + 1]; /* allow-listed build options */
    uint32_t dims;                    /* 1..3 */
    uint64_t global[3];
    uint64_t local[3];                /* all 0 = let the runtime choose */
    uint32_t n_args;
    ns_arg_t args[NS_MAX_ARGS];
    uint8_t det;                      /* ns_det_class */
    double tol;                       /* for ULP/ABS/REL */
    uint8_t item_kind;                /* ns_item_kind */
    uint32_t checks;                  /* spot-checks k */
    uint64_t work_estimate;           /* requester's estimate, in flops */
} ns_job_t;

void ns_job_init(ns_job_t *job);
void ns_job_release(ns_job_t *job); /* frees source; job reusable */

/* Take a copy of source (validated for size later). */
int ns_job_set_source(ns_job_t *job, const void *src, size_t len)
    NS_MUST_CHECK;

/* Check every field against its cap and the rules above: dims, sizes,
 * overflow-checked products, local dividing global, buffer sizes equal to
 * n_items * item_bytes, at least one output, options on the allow-list
 * (never fast-math or unsafe-math for EXACT jobs), tolerance sane. err
 * gets one line naming the field ("global[1] = 0: must be >= 1"). */
int ns_job_validate(const ns_job_t *job, char *err, size_t errlen)
    NS_MUST_CHECK;

/* Number of items (work-items or work-groups) in the NDRange. */
uint64_t ns_job_items(const ns_job_t *job);
/* Output bytes of one item: sum of item_bytes over OUT arguments. */
uint64_t ns_job_item_bytes(const ns_job_t *job);

/* msgpack form (docs/PROTOCOL.md, "Job descriptor"); decode is strict and
 * calls ns_job_validate. */
void ns_job_pack(msgpack_packer *pk, const ns_job_t *job);
int ns_job_read(ns_mpr_t *r, ns_job_t *job, char *err, size_t errlen)
    NS_MUST_CHECK;
/* Job id: hash of the packed descriptor. */
int ns_job_id(const ns_job_t *job, ns_hash_t id) NS_MUST_CHECK;

/* Parse the CLI's job flags (DESIGN.md "Interfaces": --kernel FILE.cl |
 * --builtin NAME, --entry, --global, --local, --arg..., --tolerance,
 * --checks, --item-kind) starting at argv[*i]; returns 1 and advances *i
 * past a recognised flag, 0 if argv[*i] is not a job flag, negative on a
 * bad value (err says why). Input files named by in:FILE are read later by
 * the caller; their paths are returned in in_paths[arg index], output
 * paths in out_paths. */
int ns_job_parse_flag(ns_job_t *job, int argc, char **argv, int *i,
                      const char **in_paths, const char **out_paths,
                      char *err, size_t errlen);

#endif
