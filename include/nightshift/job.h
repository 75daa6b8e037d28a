/* job.h - the job descriptor shared by exec/ (which runs it) and the
 * market (which prices, gossips and records it). Core layer: no OpenCL.
 *
 * A job is one OpenCL NDRange launch: a kernel (OpenCL C source, or the
 * name of a built-in from kernels/), an entry point, build options from an
 * allow-list, an NDRange of 1-3 dimensions, and its arguments in order.
 *
 * Units: the unit of spot checks and fraud proofs is one work-group when
 * the job has a local size (whatever item_kind says), otherwise one
 * work-item. Units are numbered row-major over the groups (or items), x
 * fastest. A unit owns the output bytes it writes, wherever they are: OUT
 * buffers are plain sizes (item_bytes is carried on the wire for
 * compatibility and means nothing to verification). Re-running unit u
 * launches exactly that unit, with the job's local size, at a global
 * offset, in a build whose index and size queries return what they
 * returned in the full launch (runner.h, docs/PROTOCOL.md "Units").
 * A kernel's outputs must not depend on the initial content of its OUT
 * buffers, and no two units may write different values to one byte.
 */
#ifndef NIGHTSHIFT_JOB_H
#define NIGHTSHIFT_JOB_H

#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/mp.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#define NS_MAX_SOURCE (1024 * 1024)           /* kernel source bytes */
#define NS_MAX_ARGS 32                        /* kernel arguments */
#define NS_MAX_ENTRY 63                       /* entry point name */
#define NS_MAX_BUILTIN 31                     /* built-in kernel name */
#define NS_MAX_OPTIONS 255                    /* build options text */
#define NS_MAX_BUFFER (UINT64_C(4) << 30)     /* one buffer, bytes */
#define NS_MAX_JOB_BYTES (UINT64_C(16) << 30) /* all buffers together */
#define NS_MAX_WORK_ITEMS (UINT64_C(1) << 32) /* global size product */
#define NS_MAX_LOCAL_ITEMS 1024               /* local size product */
#define NS_MAX_ITEM_BYTES (1024 * 1024)       /* output bytes per item */
#define NS_MAX_LOCAL_BYTES (1024 * 1024)      /* one __local argument */
#define NS_MAX_CHECKS 4096                    /* spot-checks k */
#define NS_MAX_ULP (1u << 20)                 /* ULP tolerance */
#define NS_JOB_DEFAULT_CHECKS 64 /* k when checks = 0 (DESIGN.md) */
#define NS_JOB_VERSION 1         /* first element of the encoding */
#define NS_JOB_VERSION_SHARD 2   /* ... of a shard's (three more fields) */
#define NS_MAX_SHARDS 64         /* shards of one job */
#define NS_JOB_VERSION_PIPELINE 3             /* ... of a pipeline's (steps) */
#define NS_MAX_STEPS 16                       /* launches of one pipeline */
#define NS_JOB_DOMAIN "nightshift/job/v1"     /* job id domain, no NUL */
#define NS_MAX_JOB_MSG (NS_MAX_SOURCE + 8192) /* encoded descriptor */

typedef enum {
    NS_ARG_IN = 1,  /* input buffer: size and content hash */
    NS_ARG_OUT = 2, /* output buffer: size (item_bytes informative) */
    NS_ARG_U32 = 3,
    NS_ARG_I32 = 4,
    NS_ARG_U64 = 5,
    NS_ARG_I64 = 6,
    NS_ARG_F32 = 7,
    NS_ARG_F64 = 8,
    NS_ARG_LOCAL = 9, /* __local memory of size bytes */
    NS_ARG_BUF = 10,  /* a pipeline step's argument: buffer v.u32 of the
                         job's args (see "Pipelines" below) */
} ns_arg_kind;

typedef struct {
    uint8_t kind;        /* ns_arg_kind */
    uint64_t size;       /* bytes: IN, OUT, LOCAL */
    uint32_t item_bytes; /* OUT: informative, 0..NS_MAX_ITEM_BYTES (the
                            old slice size; kept in the encoding) */
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

/* One launch of a pipeline: its args are NS_ARG_BUF (a buffer of the
 * job), scalars and NS_ARG_LOCAL, in the kernel's order. */
typedef struct {
    char entry[NS_MAX_ENTRY + 1];
    uint32_t dims; /* 1..3 */
    uint64_t global[3];
    uint64_t local[3]; /* all 0 = let the runtime choose */
    uint32_t n_args;
    ns_arg_t args[NS_MAX_ARGS];
} ns_step_t;

typedef struct {
    char builtin[NS_MAX_BUILTIN + 1]; /* "" when source is given */
    uint8_t *source;                  /* OpenCL C, owned; NULL for built-in */
    size_t source_len;
    ns_hash_t source_hash; /* hash of the source actually run
                              (built-ins: of the embedded text) */
    char entry[NS_MAX_ENTRY + 1];
    char options[NS_MAX_OPTIONS + 1]; /* allow-listed build options */
    uint32_t dims;                    /* 1..3 */
    uint64_t global[3];
    uint64_t local[3]; /* all 0 = let the runtime choose */
    uint32_t n_args;
    ns_arg_t args[NS_MAX_ARGS];
    uint8_t det;            /* ns_det_class */
    double tol;             /* for ULP/ABS/REL */
    uint8_t item_kind;      /* ns_item_kind: informative; units are groups
                               exactly when local sizes are given */
    uint32_t checks;        /* spot-checks k; 0 = default */
    uint64_t work_estimate; /* requester's estimate, in flops */
    /* A shard runs only the units whose row (their coordinate along
     * dimension shard_dim of the unit grid) is in [shard_first,
     * shard_first + shard_rows); shard_rows 0: the whole job (and
     * shard_dim 0). See "Shards" below. */
    uint32_t shard_dim;
    uint64_t shard_first, shard_rows;
    /* A pipeline (n_steps >= 1; see "Pipelines" below): entry is "", dims
     * 0, args are its buffers (IN and OUT only) and steps[] (owned) its
     * launches. 0 and NULL for a job of one launch. */
    uint32_t n_steps;
    ns_step_t *steps;
} ns_job_t;

void ns_job_init(ns_job_t *job);
void ns_job_release(ns_job_t *job); /* frees source; job reusable */

/* Take a copy of source (1..NS_MAX_SOURCE bytes, else NS_ERR_INVAL or
 * NS_ERR_TOOBIG before anything is allocated) and set source_hash to its
 * hash. A previous source is freed. NS_ERR_NOMEM. */
int ns_job_set_source(ns_job_t *job, const void *src, size_t len) NS_MUST_CHECK;

/* Check every field against its cap and the rules above. err gets one line
 * naming the field ("global[1] = 0: must be >= 1", "arg 2 (out): size 0:
 * must be >= 1"; arguments are numbered from 0, as in
 * clSetKernelArg). NS_ERR_TOOBIG for a value over a named cap, NS_ERR_INVAL
 * for any other rule:
 *  - kernel: exactly one of builtin ([a-z0-9_]+) and source (no NUL bytes,
 *    source_hash = its hash); a builtin's source_hash must be set (non-zero)
 *    by the caller from the embedded text, so the id pins the kernel text.
 *  - entry: a C identifier; options: space-separated tokens from the
 *    allow-list -cl-std=CL1.2|CL2.0|CL3.0, -D NAME[=VALUE] (also -DNAME;
 *    NAME an identifier not starting with "__", VALUE [-+]?[A-Za-z0-9_.]+),
 *    -cl-opt-disable, -w, -Werror, and the float-changing -cl-mad-enable,
 *    -cl-no-signed-zeros, -cl-finite-math-only, -cl-fast-relaxed-math,
 *    -cl-unsafe-math-optimizations, which EXACT jobs may not use.
 *  - NDRange: dims 1..3, global[d] >= 1, product <= NS_MAX_WORK_ITEMS
 *    (overflow-checked); local all 0 or all >= 1 dividing global, product
 *    <= NS_MAX_LOCAL_ITEMS; entries at or beyond dims are 0; WORK_GROUP
 *    items need local sizes.
 *  - args: 1..NS_MAX_ARGS, at least one OUT; IN and OUT size
 *    1..NS_MAX_BUFFER; OUT item_bytes 0..NS_MAX_ITEM_BYTES (not checked
 *    against the size); LOCAL size 1..NS_MAX_LOCAL_BYTES; IN + OUT sizes
 *    together <= NS_MAX_JOB_BYTES.
 *  - det: EXACT needs tol +0.0; ULP an integer 1..2^20; ABS a finite tol >
 *    0; REL a tol in (0, 1). item_kind 0 or 1; checks 0..NS_MAX_CHECKS. */
int ns_job_validate(const ns_job_t *job, char *err,
                    size_t errlen) NS_MUST_CHECK;

/* Number of units: work-groups when the job has local sizes, else
 * work-items (a pipeline: the sum over its steps); 0 when the NDRange is
 * not valid (dims, zero sizes, overflow, local not dividing). */
uint64_t ns_job_units(const ns_job_t *job);
/* Shards. The rows of a job are the units' coordinates along dimension
 * shard_dim (global[d] / local[d] with local sizes, else global[d]). A
 * shard
 * (shard_rows > 0) is launched at a global offset of its first row over
 * its rows only, from the re-run build (runner.h), so every index and
 * size query returns what it returns in the whole launch; its OUT
 * buffers start filled with 0x00. Its units keep their numbers in the
 * whole job (the RESULT's n_units is the whole job's count); spot checks
 * and fraud proofs draw and accept only units of the shard. Assembly
 * (the requester's) takes from each shard, for every OUT buffer, the
 * rows' byte slice [size * first / rows, size * (first + n) / rows): a
 * shardable job has every OUT size a multiple of its rows, and each row's
 * units write only inside their row's slice. */
uint64_t ns_job_rows(const ns_job_t *job);
/* Units of the shard (all units when not sharded); 0 when not valid. */
uint64_t ns_job_shard_units(const ns_job_t *job);
/* The i-th unit of the shard (i < ns_job_shard_units), in the whole job's
 * numbering, ascending in i. */
uint64_t ns_job_shard_unit(const ns_job_t *job, uint64_t i);
/* Unit u's row: its coordinate along the shard dimension. */
uint64_t ns_job_unit_row(const ns_job_t *job, uint64_t u);
/* Whether unit u (the whole job's numbering) belongs to the shard. */
bool ns_job_unit_in_shard(const ns_job_t *job, uint64_t u);
/* Why a job cannot be cut into n shards along dimension dim (one line
 * into err; NS_OK when it can): n in 1..NS_MAX_SHARDS and <= its rows
 * along dim, every OUT size a multiple of those rows, dim < dims, the job
 * not a shard already. */
int ns_job_shardable(const ns_job_t *job, uint32_t n, uint32_t dim, char *err,
                     size_t errlen) NS_MUST_CHECK;
/* Shard i of n along dim: rows [rows * i / n, rows * (i + 1) / n). dst
 * must be initialised; it gets a deep copy of src (NS_ERR_NOMEM). */
int ns_job_make_shard(ns_job_t *dst, const ns_job_t *src, uint32_t i,
                      uint32_t n, uint32_t dim) NS_MUST_CHECK;

/* Pipelines (descriptor version 3). Several launches of one program, in
 * order, on one provider, over the job's buffers: args[] holds only IN
 * and OUT buffers, and each step names them by index (NS_ARG_BUF). An
 * OUT buffer is written by the first step that names it (its writer) and
 * only read by the later ones; every buffer is named by some step and
 * every step writes at least one. All OUT buffers (the intermediates
 * too) are committed to like any job's outputs, so a step's check can
 * read what earlier steps wrote. Units are numbered step after step: the
 * units of step 0, then those of step 1 (each step's as in "Units"). A
 * pipeline is never sharded. Step s seen as a job of one launch (its
 * view): the step's entry, NDRange and arguments, where a buffer it
 * writes is OUT, an input IN, and a buffer an earlier step wrote IN with
 * an all-zero hash (its content comes from the outputs, never checked
 * against a hash). */
/* Launches in the job: n_steps, or 1 for a job of one launch. */
uint32_t ns_job_steps(const ns_job_t *job);
/* Step s as a job of one launch (s < ns_job_steps; a job of one launch
 * is its own step 0). view borrows job's source: never release it, and
 * do not use it after job changes. map[i] gets the job's buffer for view
 * argument i (NS_JOB_NO_BUF for a scalar or local). */
#define NS_JOB_NO_BUF UINT32_MAX
void ns_job_step_view(const ns_job_t *job, uint32_t s, ns_job_t *view,
                      uint32_t map[NS_MAX_ARGS]);
/* The step that writes OUT buffer b (0 for a job of one launch). */
uint32_t ns_job_writer(const ns_job_t *job, uint32_t b);
/* Units of step s, and the number of its first unit in the job. */
uint64_t ns_job_step_units(const ns_job_t *job, uint32_t s);
uint64_t ns_job_step_first(const ns_job_t *job, uint32_t s);
/* The step of unit u (u < ns_job_units). */
uint32_t ns_job_unit_step(const ns_job_t *job, uint64_t u);
/* A deep copy of src into dst (released first). NS_ERR_NOMEM. */
int ns_job_copy(ns_job_t *dst, const ns_job_t *src) NS_MUST_CHECK;

/* The same count under its old name (the RESULT's n_items). */
uint64_t ns_job_items(const ns_job_t *job);
/* Work-items: the product of the global sizes; 0 when the NDRange is not
 * valid. */
uint64_t ns_job_work_items(const ns_job_t *job);
/* Sum of the OUT buffer sizes. */
uint64_t ns_job_out_bytes(const ns_job_t *job);
/* Sum of item_bytes over OUT arguments (informative). */
uint64_t ns_job_item_bytes(const ns_job_t *job);
/* Spot-checks to draw: checks, or NS_JOB_DEFAULT_CHECKS when it is 0 (the
 * caller caps it at ns_job_units()). */
uint32_t ns_job_checks(const ns_job_t *job);

/* Rules of ns_job_validate, for text checked before it becomes a job (the
 * command line's flags): an entry point is a C identifier of exactly n
 * bytes; a built-in's name is n >= 1 bytes of [a-z0-9_]. Neither checks
 * the caps NS_MAX_ENTRY and NS_MAX_BUILTIN. */
bool ns_job_entry_ok(const char *s, size_t n);
bool ns_job_builtin_ok(const char *s, size_t n);
/* An argument kind's name ("in", "out", "u32"... "local"), as in error
 * lines and the CLI's --arg KIND:VALUE; "?" for an unknown kind. Static. */
const char *ns_arg_kind_name(uint8_t kind);

/* msgpack form (docs/PROTOCOL.md, "Job descriptor"). pack writes any job
 * whose dims <= 3 and n_args <= NS_MAX_ARGS (asserted): validate first.
 * read releases *job (which must have been initialised), reads one
 * descriptor, requires the canonical encoding (the bytes ns_job_pack would
 * write, so the id is the hash of the bytes received) and calls
 * ns_job_validate. It does not check for trailing bytes (the caller ends
 * the reader). On failure r->err is set, *job is left released and err
 * says why: the reader's error (NS_ERR_TRUNCATED, NS_ERR_TYPE,
 * NS_ERR_TOOBIG...), NS_ERR_VERSION, or NS_ERR_INVAL / NS_ERR_TOOBIG from
 * validation and the canonical check. */
void ns_job_pack(msgpack_packer *pk, const ns_job_t *job);
int ns_job_read(ns_mpr_t *r, ns_job_t *job, char *err,
                size_t errlen) NS_MUST_CHECK;
/* Job id: BLAKE2b-256 of NS_JOB_DOMAIN || the packed descriptor. The job
 * must validate (NS_ERR_INVAL / NS_ERR_TOOBIG otherwise). */
int ns_job_id(const ns_job_t *job, ns_hash_t id) NS_MUST_CHECK;

/* After all flags (and after the caller has filled IN sizes and hashes and
 * a builtin's source_hash and default entry): give every OUT argument with
 * item_bytes 0 the value size / n_units when that divides (informative;
 * left 0 otherwise), then ns_job_validate. */
int ns_job_finalize(ns_job_t *job, char *err, size_t errlen) NS_MUST_CHECK;

#endif
