/* jobflags.h - JOB-FLAGS: the command-line flags that describe one job
 * (`nightshift run`, `nightshift submit`), parsed into an ns_job_t. The
 * descriptor and its rules are core's (nightshift/job.h). */
#ifndef NIGHTSHIFT_CLI_JOBFLAGS_H
#define NIGHTSHIFT_CLI_JOBFLAGS_H

#include "nightshift/job.h"

#include <stddef.h>

/* Parse the CLI's job flags (DESIGN.md "Interfaces") starting at argv[*i];
 * returns 1 and advances *i past a recognised flag and its value, 0 if
 * argv[*i] is not a job flag (--min-mem, --device... belong to the
 * caller), negative on a bad value (err says why; NS_ERR_NOTFOUND,
 * NS_ERR_TOOBIG or NS_ERR_IO for --kernel's file, NS_ERR_INVAL otherwise).
 *
 *   --kernel FILE.cl   read here, at most NS_MAX_SOURCE bytes
 *   --builtin NAME     the caller fills source_hash (and entry, unless
 *                      --entry is given) from the embedded kernel
 *   --entry FN  --global X[,Y[,Z]]  --local X[,Y[,Z]]
 *   --arg in:FILE | out:BYTES:FILE[:ITEM_BYTES] | u32:V | i32:V | u64:V |
 *         i64:V | f32:V | f64:V | local:BYTES     (one per kernel argument)
 *   --tolerance exact | ulp:N | abs:X | rel:X    --checks K (0 = default)
 *   --item-kind item|group  --options "TEXT"  --work FLOPS
 *
 * Numbers are strict (decimal integers, no sign where none is allowed, no
 * junk, overflow is an error; f32/f64 values are finite strtod numbers).
 * --kernel, --builtin, --entry, --global and --local may appear once;
 * later --tolerance, --checks, --item-kind, --options, --work override
 * earlier ones.
 *
 * Paths borrow from argv: in_paths[k] / out_paths[k] for argument k (either
 * array may be NULL; otherwise NS_MAX_ARGS entries). For
 * out:BYTES:FILE:ITEM_BYTES the ':' before ITEM_BYTES is overwritten with
 * a NUL in argv so that out_paths can point at FILE; a FILE whose name
 * ends in ":DIGITS" must then be followed by an explicit :ITEM_BYTES.
 * Input files are not read here: an IN argument keeps size 0 and a zero
 * hash until the caller reads the file and fills both, before
 * ns_job_finalize. */
int ns_job_parse_flag(ns_job_t *job, int argc, char **argv, int *i,
                      const char **in_paths, const char **out_paths, char *err,
                      size_t errlen);

#endif
