/* opts.h - flags shared by `init` and `node`, and building the effective
 * configuration from them. */
#ifndef NIGHTSHIFT_CLI_OPTS_H
#define NIGHTSHIFT_CLI_OPTS_H

#include "nightshift/config.h"

#define NS_MAX_SETS 32

typedef struct {
    const char *datadir;
    const char *listen;
    const char *bootstrap[NS_MAX_BOOTSTRAP];
    int n_bootstrap;
    const char *config_file;
    const char *genesis;           /* init only */
    const char *sets[NS_MAX_SETS]; /* "section.key=value" */
    int n_sets;
    const char *log_level;
    const char *debug;
    const char *log_file; /* node only: log.file */
    const char *fault;    /* node only: test networks' fault injection */
    int json;
} ns_node_opts_t;

/* Parse argv[1..]; unknown flags and missing values are errors. */
int ns_node_opts_parse(int argc, char **argv, ns_node_opts_t *o, char *err,
                       size_t errlen);

/* Defaults, then <datadir>/config.ini if present, then --config, then
 * flags. */
int ns_node_config(const ns_node_opts_t *o, ns_config_t *cfg, char *err,
                   size_t errlen);

#endif
