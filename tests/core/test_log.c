/* test_log.c - one event per line whatever its values hold, and the log
 * file: lines appended to it, and after it is renamed (logrotate),
 * ns_log_reopen sends the next lines to a new file at the same path. The
 * test's own stderr is put back before anything is checked. */
#include "check.h"

#include "nightshift/log.h"
#include "nightshift/util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[256];

static char *s_read(const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ns_file_read(path, 1 << 20, &buf, &len) != NS_OK)
        return NULL;
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, buf, len);
        s[len] = '\0';
    }
    free(buf);
    return s;
}

static int s_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

TEST(file_escape_and_reopen)
{
    char path[512], moved[512];
    snprintf(path, sizeof path, "%s/node.log", s_dir);
    snprintf(moved, sizeof moved, "%s/node.log.1", s_dir);
    int saved = dup(STDERR_FILENO);
    CHECK(saved >= 0);

    int rc_open = ns_log_open_file(path);
    ns_info(NS_MOD_NODE, "event=first error=\"two\nlines\r\tand \x01 more\"");
    ns_info(NS_MOD_NODE, "event=second");
    int rc_ren = rename(path, moved);
    ns_info(NS_MOD_NODE, "event=third"); /* still the renamed file */
    ns_log_reopen();
    ns_info(NS_MOD_NODE, "event=fourth");
    ns_debug(NS_MOD_NODE, "event=hidden"); /* below the threshold */

    /* a path that cannot be opened: the lines stay in the current file */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.log", s_dir);
    int rc_bad = ns_log_open_file(bad);

    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);

    CHECK_RC(rc_open, NS_OK);
    CHECK_EQ_INT(rc_ren, 0);
    CHECK_RC(rc_bad, NS_ERR_IO);
    char *old = s_read(moved), *cur = s_read(path);
    CHECK(old && cur);
    if (!old || !cur) {
        free(old);
        free(cur);
        return;
    }
    /* the old file: first, second and third, one line each */
    CHECK_EQ_INT(s_lines(old), 3);
    CHECK(strstr(old, "event=first error=\"two\\nlines\\r\\tand \\x01 "
                      "more\"\n") != NULL);
    CHECK(strstr(old, "level=info mod=node event=second\n") != NULL);
    CHECK(strstr(old, "event=third\n") != NULL);
    CHECK(strstr(old, "event=fourth") == NULL);
    /* the new file: the reopen said, then fourth */
    CHECK_EQ_INT(s_lines(cur), 2);
    CHECK(strstr(cur, "level=info mod=core event=log_reopened path=") != NULL);
    CHECK(strstr(cur, "event=fourth\n") != NULL);
    CHECK(strstr(cur, "hidden") == NULL);
    CHECK(strncmp(cur, "ts=", 3) == 0);
    free(old);
    free(cur);
}

TEST(reopen_without_file_is_nothing)
{
    /* a reopen whose path cannot be opened (its directory is gone)
     * fails softly: no crash, nothing created, logging goes on */
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/gone", s_dir);
    CHECK_EQ_INT(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/x.log", dir);
    int saved = dup(STDERR_FILENO);
    int rc = ns_log_open_file(path);
    unlink(path);
    rmdir(dir);
    ns_log_reopen(); /* fails: the directory is gone */
    ns_info(NS_MOD_NODE, "event=after");
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    CHECK_RC(rc, NS_OK);
    CHECK(access(path, F_OK) != 0); /* nothing recreated it */
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(s_dir, sizeof s_dir, "%s/ns-test-log-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(s_dir))
        return 1;
    RUN(file_escape_and_reopen);
    RUN(reopen_without_file_is_nothing);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
    return ns_test_finish("core_log");
}
