#include "opts.h"

#include "nightshift/util.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ns_node_opts_parse(int argc, char **argv, ns_node_opts_t *o, char *err,
                       size_t errlen)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VALUE()                                                                \
    do {                                                                       \
        if (!v) {                                                              \
            snprintf(err, errlen, "%s needs a value", a);                      \
            return NS_ERR_INVAL;                                               \
        }                                                                      \
        i++;                                                                   \
    } while (0)
        if (strcmp(a, "--datadir") == 0) {
            VALUE();
            o->datadir = v;
        } else if (strcmp(a, "--listen") == 0) {
            VALUE();
            o->listen = v;
        } else if (strcmp(a, "--bootstrap") == 0) {
            VALUE();
            if (o->n_bootstrap >= NS_MAX_BOOTSTRAP) {
                snprintf(err, errlen, "at most %d --bootstrap",
                         NS_MAX_BOOTSTRAP);
                return NS_ERR_INVAL;
            }
            o->bootstrap[o->n_bootstrap++] = v;
        } else if (strcmp(a, "--config") == 0) {
            VALUE();
            o->config_file = v;
        } else if (strcmp(a, "--genesis") == 0) {
            VALUE();
            o->genesis = v;
        } else if (strcmp(a, "--set") == 0) {
            VALUE();
            if (o->n_sets >= NS_MAX_SETS) {
                snprintf(err, errlen, "at most %d --set", NS_MAX_SETS);
                return NS_ERR_INVAL;
            }
            o->sets[o->n_sets++] = v;
        } else if (strcmp(a, "--log-level") == 0) {
            VALUE();
            o->log_level = v;
        } else if (strcmp(a, "--debug") == 0) {
            VALUE();
            o->debug = v;
        } else if (strcmp(a, "--log-file") == 0) {
            VALUE();
            o->log_file = v;
        } else if (strcmp(a, "--fault") == 0) {
            VALUE();
            o->fault = v;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else {
            snprintf(err, errlen, "unknown argument '%s'", a);
            return NS_ERR_INVAL;
        }
#undef VALUE
    }
    return NS_OK;
}

int ns_node_config(const ns_node_opts_t *o, ns_config_t *cfg, char *err,
                   size_t errlen)
{
    char path[PATH_MAX];
    ns_config_defaults(cfg);
    if (o->datadir &&
        ns_path_join(path, sizeof path, o->datadir, "config.ini") == NS_OK &&
        access(path, F_OK) == 0) {
        int rc = ns_config_load(cfg, path, err, errlen);
        if (rc != NS_OK)
            return rc;
    }
    if (o->config_file) {
        int rc = ns_config_load(cfg, o->config_file, err, errlen);
        if (rc != NS_OK)
            return rc;
    }
    if (o->listen &&
        ns_config_set(cfg, "node", "listen", o->listen, err, errlen) != NS_OK)
        return NS_ERR_CONFIG;
    if (o->n_bootstrap)
        cfg->n_bootstrap = 0; /* flags replace the configured list */
    for (int i = 0; i < o->n_bootstrap; i++)
        if (ns_config_set(cfg, "node", "bootstrap", o->bootstrap[i], err,
                          errlen) != NS_OK) {
            snprintf(err, errlen,
                     "bad --bootstrap '%s': expected ID@tcp://HOST:PORT",
                     o->bootstrap[i]);
            return NS_ERR_CONFIG;
        }
    for (int i = 0; i < o->n_sets; i++) {
        char section[32], key[64];
        const char *dot = strchr(o->sets[i], '.');
        const char *eq = strchr(o->sets[i], '=');
        if (!dot || !eq || dot > eq || dot - o->sets[i] >= 32 ||
            eq - dot - 1 >= 64) {
            snprintf(err, errlen, "bad --set '%s': expected SECTION.KEY=VALUE",
                     o->sets[i]);
            return NS_ERR_CONFIG;
        }
        snprintf(section, sizeof section, "%.*s", (int)(dot - o->sets[i]),
                 o->sets[i]);
        snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
        if (ns_config_set(cfg, section, key, eq + 1, err, errlen) != NS_OK)
            return NS_ERR_CONFIG;
    }
    if (o->log_level &&
        ns_config_set(cfg, "log", "level", o->log_level, err, errlen) != NS_OK)
        return NS_ERR_CONFIG;
    if (o->debug &&
        ns_config_set(cfg, "log", "debug", o->debug, err, errlen) != NS_OK)
        return NS_ERR_CONFIG;
    if (o->log_file) {
        /* the flag's path is the shell's: relative to the working
         * directory (a setting's is relative to the datadir) */
        char abs[PATH_MAX], cwd[PATH_MAX];
        const char *file = o->log_file;
        if (file[0] && file[0] != '/') {
            if (!getcwd(cwd, sizeof cwd) ||
                ns_path_join(abs, sizeof abs, cwd, file) != NS_OK) {
                snprintf(err, errlen, "--log-file %s: path too long", file);
                return NS_ERR_CONFIG;
            }
            file = abs;
        }
        if (ns_config_set(cfg, "log", "file", file, err, errlen) != NS_OK)
            return NS_ERR_CONFIG;
    }
    return NS_OK;
}
