/* bench_ctl.c - ask a running node one control-socket query and print the
 * answer as JSON (for benchmarks: `latency` has no CLI subcommand).
 *
 *   bench_ctl DATADIR QUERY
 */
#include "ctl.h"

#include "nightshift/mp.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_ctl DATADIR QUERY\n");
        return 2;
    }
    uint8_t *doc = NULL;
    size_t len = 0;
    char err[512], *json = NULL;
    if (ns_ctl_query(argv[1], argv[2], &doc, &len, err, sizeof err) != NS_OK) {
        fprintf(stderr, "bench_ctl: %s\n", err);
        return 1;
    }
    if (ns_mp_to_json(doc, len, &json, 0) != NS_OK) {
        fprintf(stderr, "bench_ctl: malformed reply\n");
        free(doc);
        return 1;
    }
    puts(json);
    free(json);
    free(doc);
    return 0;
}
