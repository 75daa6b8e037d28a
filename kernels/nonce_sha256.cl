/* nonce_sha256: SHA-256 of (prefix || nonce) for a range of nonces.
 *
 * Arguments: prefix (in, 32 bytes), out (out, 8 bytes per work-item),
 *   ulong nonce_base.
 * NDRange: global (count), any local size; work-item g hashes nonce
 *   nonce_base + g.
 * Item: one work-item = one nonce, item_bytes 8: item g owns out[8g ..
 *   8g + 7], the first 8 bytes of SHA-256(prefix || nonce as 8 bytes
 *   little-endian) (FIPS 180-4, one 64-byte block). The requester looks
 *   for the smallest value, or one under a target. Integer only: exact.
 */

__constant uint ns_k256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define NS_ROTR(x, n) rotate((uint)(x), (uint)(32 - (n)))

__kernel void nonce_sha256(__global const uchar *prefix, __global uchar *out,
                           const ulong nonce_base)
{
    size_t g = get_global_id(0);
    ulong nonce = nonce_base + (ulong)g;
    uint w[64];
    for (int i = 0; i < 8; i++)
        w[i] = (uint)prefix[4 * i] << 24 | (uint)prefix[4 * i + 1] << 16 |
               (uint)prefix[4 * i + 2] << 8 | (uint)prefix[4 * i + 3];
    /* the nonce's little-endian bytes, read as big-endian words */
    uint lo = (uint)nonce, hi = (uint)(nonce >> 32);
    w[8] = (lo & 0xffu) << 24 | (lo & 0xff00u) << 8 | (lo >> 8 & 0xff00u) |
           lo >> 24;
    w[9] = (hi & 0xffu) << 24 | (hi & 0xff00u) << 8 | (hi >> 8 & 0xff00u) |
           hi >> 24;
    w[10] = 0x80000000u; /* padding bit after 40 bytes */
    for (int i = 11; i < 15; i++)
        w[i] = 0;
    w[15] = 40 * 8; /* message length in bits */
    for (int i = 16; i < 64; i++) {
        uint s0 =
            NS_ROTR(w[i - 15], 7) ^ NS_ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint s1 =
            NS_ROTR(w[i - 2], 17) ^ NS_ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint a = 0x6a09e667, b = 0xbb67ae85, c = 0x3c6ef372, d = 0xa54ff53a;
    uint e = 0x510e527f, f = 0x9b05688c, h6 = 0x1f83d9ab, h7 = 0x5be0cd19;
    for (int i = 0; i < 64; i++) {
        uint s1 = NS_ROTR(e, 6) ^ NS_ROTR(e, 11) ^ NS_ROTR(e, 25);
        uint ch = (e & f) ^ (~e & h6);
        uint t1 = h7 + s1 + ch + ns_k256[i] + w[i];
        uint s0 = NS_ROTR(a, 2) ^ NS_ROTR(a, 13) ^ NS_ROTR(a, 22);
        uint maj = (a & b) ^ (a & c) ^ (b & c);
        uint t2 = s0 + maj;
        h7 = h6;
        h6 = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    uint h0 = 0x6a09e667 + a, h1 = 0xbb67ae85 + b;
    __global uchar *o = out + 8 * g;
    o[0] = (uchar)(h0 >> 24);
    o[1] = (uchar)(h0 >> 16);
    o[2] = (uchar)(h0 >> 8);
    o[3] = (uchar)h0;
    o[4] = (uchar)(h1 >> 24);
    o[5] = (uchar)(h1 >> 16);
    o[6] = (uchar)(h1 >> 8);
    o[7] = (uchar)h1;
}
