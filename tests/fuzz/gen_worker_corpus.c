/* gen_worker_corpus.c - write seed inputs for fuzz_worker into a directory.
 *
 *   fuzz_worker_gen_corpus DIR
 *
 * Seeds: frame heads (the 4-byte prefix stripped) written by the real
 * packers and read back before they are saved: HELLO of a measured GPU
 * and of a device that did not open (with the longest error text), RUN
 * of every job of seeds.h, ITEMS with one item and with many, RESULT of a
 * success and of a failed build; with mutants that reach the readers'
 * error paths (truncated, a trailing byte, the last byte flipped, another
 * message type).
 */
#include "seeds.h"

#include "nightshift/worker_frame.h"

/* The head of the frame in sb, saved (with mutants when type_at < len);
 * sb is destroyed. */
static void s_save(const char *name, msgpack_sbuffer *sb, size_t type_at,
                   uint8_t other_type)
{
    const uint8_t *head = (const uint8_t *)sb->data + NS_WORKER_FRAME_LEN;
    size_t len = sb->size - NS_WORKER_FRAME_LEN;
    if (ns_worker_frame_len((const uint8_t *)sb->data) != len)
        seeds_die(name, NS_ERR_INVAL);
    if (type_at < len)
        seeds_save_mutants(name, head, len, type_at, other_type);
    else
        seeds_save(name, head, len);
    msgpack_sbuffer_destroy(sb);
}

int main(int argc, char **argv)
{
    msgpack_sbuffer sb;
    seeds_init(argc, argv);

    /* HELLO */
    ns_devinfo_t dev;
    ns_worker_hello_t h;
    memset(&dev, 0, sizeof dev);
    snprintf(dev.name, sizeof dev.name, "NVIDIA H100 80GB HBM3");
    snprintf(dev.vendor, sizeof dev.vendor, "NVIDIA Corporation");
    dev.type = NS_DEV_GPU;
    dev.global_mem_bytes = UINT64_C(85045231616);
    dev.max_alloc_bytes = UINT64_C(21261307904);
    dev.compute_units = 132;
    dev.clock_mhz = 1980;
    snprintf(dev.cl_c_version, sizeof dev.cl_c_version, "OpenCL C 3.0");
    dev.gflops = 51234.5;
    dev.gbps = 2890.25;
    ns_worker_hello_pack(&sb, NS_OK, "", &dev);
    seeds_check(
        ns_worker_hello_read((const uint8_t *)sb.data + 4, sb.size - 4, &h),
        "hello");
    s_save("hello, a measured GPU", &sb, 1, NS_WORKER_MSG_RESULT);
    static char error[NS_WORKER_MAX_ERROR + 2];
    memset(error, 'e', sizeof error - 1);
    memset(&dev, 0, sizeof dev);
    ns_worker_hello_pack(&sb, NS_ERR_OPENCL, error, &dev);
    seeds_check(
        ns_worker_hello_read((const uint8_t *)sb.data + 4, sb.size - 4, &h),
        "hello");
    s_save("hello, no device, the longest error", &sb, SIZE_MAX, 0);
    ns_worker_hello_pack(&sb, NS_ERR_NOTFOUND, "no device 7", &dev);
    s_save("hello, no device 7", &sb, SIZE_MAX, 0);

    /* RUN and ITEMS */
    static ns_job_t job;
    static ns_worker_request_t q;
    const char *name;
    char err[256], what[160];
    static uint64_t items[NS_WORKER_MAX_ITEMS];
    for (uint32_t i = 0; i < NS_WORKER_MAX_ITEMS; i++)
        items[i] = i * 3;
    for (int v = 0; v < SEEDS_N_JOBS; v++) {
        seeds_job(&job, v, &name);
        seeds_check(ns_worker_request_pack(&sb, &job, NULL, 0, v & 1, 0),
                    "request");
        ns_job_init(&q.job);
        seeds_check(ns_worker_request_read((const uint8_t *)sb.data + 4,
                                           sb.size - 4, &q, err, sizeof err),
                    "request");
        ns_job_release(&q.job);
        free(q.items);
        snprintf(what, sizeof what, "RUN %s", name);
        s_save(what, &sb, v == 0 ? 1 : SIZE_MAX, NS_WORKER_MSG_HELLO);
    }
    seeds_job(&job, 0, &name); /* 1024 items */
    uint64_t one = 1023;
    seeds_check(ns_worker_request_pack(&sb, &job, &one, 1, true, 0), "items");
    s_save("ITEMS, the last item of 1024", &sb, 1, NS_WORKER_MSG_RUN);
    seeds_check(ns_worker_request_pack(&sb, &job, items, 300, false, 0),
                "items");
    s_save("ITEMS, 300 items", &sb, SIZE_MAX, 0);
    seeds_check(ns_worker_request_pack(&sb, &job, items, 0, false, 0), "items");
    s_save("ITEMS, none", &sb, SIZE_MAX, 0);
    uint32_t files = 0;
    for (uint32_t i = 0; i < job.n_args; i++)
        if (job.args[i].kind == NS_ARG_IN)
            files |= UINT32_C(1) << i;
    seeds_check(ns_worker_request_pack(&sb, &job, NULL, 0, true, files),
                "files");
    s_save("RUN, every input a file descriptor", &sb, SIZE_MAX, 0);
    /* PREFLIGHT and CHECK (the requester's work in the sandbox) */
    ns_worker_extra_t x;
    memset(&x, 0, sizeof x);
    x.what = NS_PF_CHECK | NS_PF_TIME;
    x.k = 4;
    snprintf(x.name, sizeof x.name, "mlp.cl");
    seeds_check(ns_worker_request_pack_extra(&sb, NS_WORKER_MSG_PREFLIGHT, &job,
                                             true, files, &x),
                "preflight");
    ns_job_init(&q.job);
    seeds_check(ns_worker_request_read((const uint8_t *)sb.data + 4,
                                       sb.size - 4, &q, err, sizeof err),
                "preflight");
    ns_job_release(&q.job);
    s_save("PREFLIGHT, check and time 4 units", &sb, 1, NS_WORKER_MSG_RUN);
    x.what = NS_PF_SAMPLE;
    x.name[0] = '\0';
    seeds_check(ns_worker_request_pack_extra(&sb, NS_WORKER_MSG_PREFLIGHT, &job,
                                             false, 0, &x),
                "preflight");
    s_save("PREFLIGHT, sample", &sb, SIZE_MAX, 0);
    memset(&x, 0, sizeof x);
    x.k = 64;
    memset(x.desc_id, 0xd1, sizeof x.desc_id);
    memset(x.root, 0x77, sizeof x.root);
    memset(x.secret, 0x5e, sizeof x.secret);
    for (uint32_t i = 0; i < job.n_args; i++)
        if (job.args[i].kind == NS_ARG_OUT)
            x.outfiles |= UINT32_C(1) << i;
    seeds_check(ns_worker_request_pack_extra(&sb, NS_WORKER_MSG_CHECK, &job,
                                             true, files, &x),
                "check");
    ns_job_init(&q.job);
    seeds_check(ns_worker_request_read((const uint8_t *)sb.data + 4,
                                       sb.size - 4, &q, err, sizeof err),
                "check");
    ns_job_release(&q.job);
    s_save("CHECK, 64 units, claims as files", &sb, 1, NS_WORKER_MSG_ITEMS);
    ns_job_release(&job);

    /* RESULT */
    ns_timings_t t = {.build_us = 120000,
                      .upload_us = 350,
                      .run_us = UINT64_C(1) << 40,
                      .download_us = 17,
                      .cache_hit = true};
    ns_worker_reply_t r;
    ns_worker_result_pack(&sb, NS_OK, "", &t);
    seeds_check(
        ns_worker_result_read((const uint8_t *)sb.data + 4, sb.size - 4, &r),
        "result");
    s_save("RESULT, ok from the cache", &sb, 1, NS_WORKER_MSG_HELLO);
    memset(&t, 0, sizeof t);
    t.build_us = 99;
    ns_worker_result_pack(&sb, NS_ERR_OPENCL,
                          "<kernel>:1:1: error: unknown type name 'flot'", &t);
    seeds_check(
        ns_worker_result_read((const uint8_t *)sb.data + 4, sb.size - 4, &r),
        "result");
    s_save("RESULT, build failed", &sb, SIZE_MAX, 0);
    ns_worker_result_pack(&sb, NS_ERR_TIMEOUT, error, &t);
    s_save("RESULT, the longest error", &sb, SIZE_MAX, 0);
    uint64_t pf[3] = {123456, 6, 88000};
    ns_worker_result_pack_extra(&sb, NS_OK, "", &t, pf, 3);
    seeds_check(
        ns_worker_result_read((const uint8_t *)sb.data + 4, sb.size - 4, &r),
        "result");
    s_save("RESULT of a PREFLIGHT", &sb, 1, NS_WORKER_MSG_HELLO);
    uint64_t ck[10] = {64, 1, 17, 2, 4096, 12, 5000, 900, 4000, 300};
    ns_worker_result_pack_extra(&sb, NS_OK, "", &t, ck, 10);
    s_save("RESULT of a CHECK, one unit wrong", &sb, SIZE_MAX, 0);

    seeds_done();
    return 0;
}
