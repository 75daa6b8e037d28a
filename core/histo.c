/* histo.c - duration histograms (histo.h). */
#include "nightshift/histo.h"

#include "nightshift/mp.h"

const double ns_histo_bounds_s[NS_HISTO_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 600};

void ns_histo_add_us(ns_histo_t *h, uint64_t us)
{
    double s = (double)us / 1e6;
    for (int i = 0; i < NS_HISTO_BUCKETS; i++)
        if (s <= ns_histo_bounds_s[i]) {
            h->counts[i]++;
            break;
        }
    h->count++;
    h->sum_us += us;
}

void ns_histo_pack(const ns_histo_t *h, msgpack_packer *pk)
{
    msgpack_pack_map(pk, 4);
    ns_mp_str(pk, "le");
    msgpack_pack_array(pk, NS_HISTO_BUCKETS);
    for (int i = 0; i < NS_HISTO_BUCKETS; i++)
        msgpack_pack_double(pk, ns_histo_bounds_s[i]);
    ns_mp_str(pk, "counts");
    msgpack_pack_array(pk, NS_HISTO_BUCKETS);
    uint64_t cum = 0;
    for (int i = 0; i < NS_HISTO_BUCKETS; i++) {
        cum += h->counts[i];
        msgpack_pack_uint64(pk, cum);
    }
    ns_mp_str(pk, "count");
    msgpack_pack_uint64(pk, h->count);
    ns_mp_str(pk, "sum_s");
    msgpack_pack_double(pk, (double)h->sum_us / 1e6);
}
