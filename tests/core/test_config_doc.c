/* test_config_doc.c - docs/CONFIG.md and the code's settings agree: every
 * setting of ns_config_keys has a row in the table of docs/CONFIG.md, every
 * row names a setting that exists, and each row's default is the one
 * ns_config_defaults gives. The file's path is NS_CONFIG_DOC (set by
 * tests/core/CMakeLists.txt), or argv[1]. */
#include "check.h"

#include "nightshift/config.h"
#include "nightshift/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 128

typedef struct {
    char name[96];   /* "node.listen" */
    char deflt[256]; /* as written, "(empty)" turned into "" */
    int line;        /* in the file, for messages */
} s_row_t;

static s_row_t s_rows[MAX_ROWS];
static int s_n_rows;
static const char *s_path = NS_CONFIG_DOC;

/* The text of a cell "| `x` |" between backquotes, or NULL. */
static int s_cell_code(const char *cell, size_t len, char *out, size_t cap)
{
    while (len && (*cell == ' ')) {
        cell++;
        len--;
    }
    while (len && cell[len - 1] == ' ')
        len--;
    if (len < 2 || cell[0] != '`' || cell[len - 1] != '`' || len - 2 >= cap)
        return -1;
    memcpy(out, cell + 1, len - 2);
    out[len - 2] = '\0';
    return 0;
}

/* Rows "| `section.key` | `default` | meaning | read by |" of the file. */
static int s_parse(const char *text)
{
    int line = 0;
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        line++;
        if (len > 3 && p[0] == '|' && p[1] == ' ' && p[2] == '`') {
            const char *c1 = p + 1;
            const char *c2 = memchr(c1, '|', len - 1);
            const char *c3 =
                c2 ? memchr(c2 + 1, '|', len - (size_t)(c2 + 1 - p)) : NULL;
            if (!c3 || s_n_rows >= MAX_ROWS) {
                ns_test_fail(__FILE__, __LINE__, "%s:%d: malformed row", s_path,
                             line);
                return -1;
            }
            s_row_t *r = &s_rows[s_n_rows];
            if (s_cell_code(c1, (size_t)(c2 - c1), r->name, sizeof r->name) ||
                s_cell_code(c2 + 1, (size_t)(c3 - c2 - 1), r->deflt,
                            sizeof r->deflt)) {
                ns_test_fail(__FILE__, __LINE__,
                             "%s:%d: setting and default must be `code`",
                             s_path, line);
                return -1;
            }
            if (strcmp(r->deflt, "(empty)") == 0)
                r->deflt[0] = '\0';
            r->line = line;
            s_n_rows++;
        }
        p += len + (end ? 1 : 0);
    }
    return 0;
}

TEST(every_setting_documented_with_its_default)
{
    ns_config_t def;
    ns_config_defaults(&def);
    for (size_t i = 0; i < ns_config_n_keys; i++) {
        const ns_config_key_t *k = &ns_config_keys[i];
        char name[96], value[1024];
        snprintf(name, sizeof name, "%s.%s", k->section, k->key);
        int found = -1;
        for (int r = 0; r < s_n_rows; r++)
            if (strcmp(s_rows[r].name, name) == 0)
                found = r;
        if (found < 0) {
            ns_test_fail(__FILE__, __LINE__,
                         "setting %s (core/config.c) is not in %s", name,
                         s_path);
            continue;
        }
        ns_test_pass();
        CHECK_RC(ns_config_get(&def, k->section, k->key, value, sizeof value),
                 NS_OK);
        if (strcmp(value, s_rows[found].deflt) != 0)
            ns_test_fail(__FILE__, __LINE__,
                         "%s:%d: %s: documented default '%s', the code's "
                         "is '%s'",
                         s_path, s_rows[found].line, name, s_rows[found].deflt,
                         value);
        else
            ns_test_pass();
    }
}

TEST(every_documented_setting_exists_once)
{
    for (int r = 0; r < s_n_rows; r++) {
        int known = 0;
        for (size_t i = 0; i < ns_config_n_keys; i++) {
            char name[96];
            snprintf(name, sizeof name, "%s.%s", ns_config_keys[i].section,
                     ns_config_keys[i].key);
            known += strcmp(name, s_rows[r].name) == 0;
        }
        if (!known)
            ns_test_fail(__FILE__, __LINE__,
                         "%s:%d: %s is documented but is no setting of "
                         "core/config.c",
                         s_path, s_rows[r].line, s_rows[r].name);
        else
            ns_test_pass();
        for (int q = 0; q < r; q++)
            if (strcmp(s_rows[q].name, s_rows[r].name) == 0)
                ns_test_fail(__FILE__, __LINE__,
                             "%s:%d: %s is documented twice (line %d)", s_path,
                             s_rows[r].line, s_rows[r].name, s_rows[q].line);
    }
    CHECK((size_t)s_n_rows == ns_config_n_keys);
}

int main(int argc, char **argv)
{
    uint8_t *text = NULL;
    size_t len = 0;
    if (argc > 1)
        s_path = argv[1];
    if (ns_file_read(s_path, 1 << 20, &text, &len) != NS_OK) {
        fprintf(stderr, "cannot read %s\n", s_path);
        return 1;
    }
    char *s = malloc(len + 1);
    if (!s)
        return 1;
    memcpy(s, text, len);
    s[len] = '\0';
    free(text);
    if (s_parse(s) == 0) {
        RUN(every_setting_documented_with_its_default);
        RUN(every_documented_setting_exists_once);
    }
    free(s);
    return ns_test_finish("core_config_doc");
}
