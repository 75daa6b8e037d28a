/* gen_job_corpus.c - write seed inputs for fuzz_job into a directory.
 *
 *   fuzz_job_gen_corpus DIR
 *
 * Seeds: every job of seeds.h packed by ns_job_pack (each read back with
 * ns_job_read before it is saved), and mutants of the first that reach
 * the reader's error paths: truncated, a trailing byte, the last field
 * changed, version 2, a non-canonical integer, a source whose hash does
 * not match; the pipelines of seeds.h (version 3) and their mutants.
 */
#include "seeds.h"

int main(int argc, char **argv)
{
    static ns_job_t job, again;
    ns_buf_t b;
    char err[256];
    const char *name;
    seeds_init(argc, argv);
    ns_buf_init(&b);
    for (int v = 0; v < SEEDS_N_JOBS; v++) {
        seeds_job(&job, v, &name);
        seeds_pack_job(&job, &b);
        ns_mpr_t r;
        ns_mpr_init(&r, b.data, b.len);
        if (ns_job_read(&r, &again, err, sizeof err) != NS_OK) {
            fprintf(stderr, "%s: job %d does not read back: %s\n", argv[0], v,
                    err);
            return 1;
        }
        if (v == 0 || v == 1) /* version is the fixint after the header */
            seeds_save_mutants(name, b.data, b.len, 1, 2);
        else
            seeds_save(name, b.data, b.len);
    }

    /* pipelines (version 3), each read back; mutants of the first (the
     * version byte set to 2), and the version byte of a pipeline set to 1
     * and of job 0 set to 3 (both layouts refused) */
    for (int v = 0; v < SEEDS_N_PIPES; v++) {
        seeds_pipe(&job, v, &name);
        seeds_pack_job(&job, &b);
        ns_mpr_t r;
        ns_mpr_init(&r, b.data, b.len);
        if (ns_job_read(&r, &again, err, sizeof err) != NS_OK) {
            fprintf(stderr, "%s: pipeline %d does not read back: %s\n", argv[0],
                    v, err);
            return 1;
        }
        if (v == 0) {
            seeds_save_mutants(name, b.data, b.len, 1, 2);
            b.data[1] = 1;
            seeds_save("pipeline 0, version 1", b.data, b.len);
        } else {
            seeds_save(name, b.data, b.len);
        }
    }
    seeds_job(&job, 0, &name);
    seeds_pack_job(&job, &b);
    b.data[1] = 3;
    seeds_save("job 0, version 3", b.data, b.len);

    /* job 0 with its first global size as a uint64 (canonical: uint16) */
    seeds_job(&job, 0, &name);
    seeds_pack_job(&job, &b);
    static const uint8_t u16_1024[] = {0xcd, 0x04, 0x00};
    uint8_t *at = NULL;
    for (size_t i = 0; !at && i + sizeof u16_1024 <= b.len; i++)
        if (memcmp(b.data + i, u16_1024, sizeof u16_1024) == 0)
            at = b.data + i;
    if (at) {
        ns_buf_t m;
        ns_buf_init(&m);
        static const uint8_t u64_1024[] = {0xcf, 0, 0, 0, 0, 0, 0, 0x04, 0x00};
        size_t head = (size_t)(at - b.data);
        if (ns_buf_append(&m, b.data, head) != NS_OK ||
            ns_buf_append(&m, u64_1024, sizeof u64_1024) != NS_OK ||
            ns_buf_append(&m, at + sizeof u16_1024,
                          b.len - head - sizeof u16_1024) != NS_OK)
            seeds_die("append", NS_ERR_NOMEM);
        seeds_save("job 0, global as uint64 (not canonical)", m.data, m.len);
        ns_buf_release(&m);
    }

    /* a source whose hash is of another text */
    seeds_job(&job, 1, &name);
    job.source[0] = '_';
    seeds_pack_job(&job, &b);
    seeds_save("job 1, source changed after hashing", b.data, b.len);

    ns_buf_release(&b);
    ns_job_release(&job);
    ns_job_release(&again);
    seeds_done();
    return 0;
}
