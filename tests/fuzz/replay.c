/* replay.c - run a libFuzzer target over stored inputs, without libFuzzer.
 *
 *   fuzz_wire_replay DIR_OR_FILE...
 *
 * Calls LLVMFuzzerTestOneInput once per regular file (directories are read
 * one level deep, dot files skipped). Each input sits in a buffer of its
 * exact size, so a sanitizer build catches a read one byte past the end.
 * Exits non-zero if a path cannot be read or no input was found: an empty
 * corpus would make the ctest pass without testing anything.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLAY_MAX_BYTES (16u * 1024 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int s_run_file(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size > REPLAY_MAX_BYTES) {
        fprintf(stderr, "replay: cannot use %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *data = malloc(size ? size : 1);
    if (!data || fread(data, 1, size, f) != size) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(data);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    (*count)++;
    return 0;
}

static int s_run_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open %s\n", dir);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(dir) + 1 + strlen(e->d_name) + 1;
        char *path = malloc(len);
        if (!path) {
            rc = -1;
            break;
        }
        snprintf(path, len, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            free(path);
            continue;
        }
        if (s_run_file(path, count) != 0)
            rc = -1;
        free(path);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such path %s\n", argv[i]);
            rc = 1;
        } else if (S_ISDIR(st.st_mode) ? s_run_dir(argv[i], &count) != 0
                                       : s_run_file(argv[i], &count) != 0) {
            rc = 1;
        }
    }
    printf("replay: %zu inputs, no crash\n", count);
    if (count == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        rc = 1;
    }
    return rc;
}
