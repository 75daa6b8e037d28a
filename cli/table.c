#include "cli.h"

#include "nightshift/mp.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void ns_cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "nightshift %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int ns_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

void ns_table_init(ns_table_t *t, int ncols, const char *const *headers)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols < NS_TABLE_MAX_COLS ? ncols : NS_TABLE_MAX_COLS;
    for (int i = 0; i < t->ncols; i++)
        t->headers[i] = headers[i];
}

void ns_table_row(ns_table_t *t, const char *const *cells)
{
    if (t->nrows == t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
        char **nc = realloc(t->cells, cap * (size_t)t->ncols * sizeof *nc);
        if (!nc)
            return;
        t->cells = nc;
        t->cap_rows = cap;
    }
    for (int i = 0; i < t->ncols; i++)
        t->cells[t->nrows * (size_t)t->ncols + (size_t)i] =
            strdup(cells[i] ? cells[i] : "");
    t->nrows++;
}

void ns_table_print(const ns_table_t *t, FILE *out)
{
    size_t width[NS_TABLE_MAX_COLS];
    for (int c = 0; c < t->ncols; c++) {
        width[c] = strlen(t->headers[c]);
        for (size_t r = 0; r < t->nrows; r++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)c];
            size_t n = s ? strlen(s) : 0;
            if (n > width[c])
                width[c] = n;
        }
    }
    for (int c = 0; c < t->ncols; c++)
        fprintf(out, "%-*s%s", c + 1 < t->ncols ? (int)width[c] : 0,
                t->headers[c], c + 1 < t->ncols ? "  " : "\n");
    for (size_t r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)c];
            fprintf(out, "%-*s%s", c + 1 < t->ncols ? (int)width[c] : 0,
                    s ? s : "", c + 1 < t->ncols ? "  " : "\n");
        }
}

void ns_table_release(ns_table_t *t)
{
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

void ns_fmt_bytes(char *out, size_t cap, unsigned long long bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, cap, "%llu B", bytes);
    else
        snprintf(out, cap, "%.1f %s", v, units[u]);
}

int ns_cli_print_json(const void *msgpack, size_t len)
{
    char *json = NULL;
    if (ns_mp_to_json(msgpack, len, &json, 1) != NS_OK) {
        fprintf(stderr, "nightshift: cannot render the document as JSON\n");
        return 1;
    }
    puts(json);
    free(json);
    return 0;
}
