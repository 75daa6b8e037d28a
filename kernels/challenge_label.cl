/* challenge_label: the memory-filling labelling of the hardware challenge
 * and its Merkle commitment (include/nightshift/challenge.h states the
 * rule; exec/challenge.c has the host reference and the verifier).
 *
 * challenge_label: one launch per segment, one work-item per lane; label v
 * (row t, lane l) is at labels[t * lanes + l], so a row is written
 * coalesced. challenge_label_leaves: BLAKE2b-256(0x00 || 4096-byte chunk)
 * per chunk. challenge_label_nodes: one level of the hash.h tree,
 * BLAKE2b-256(0x01 || left || right), an odd last node promoted. Words
 * are little-endian, as on every device the prover accepts.
 */

#define QR(a, b, c, d)                                                         \
    a += b;                                                                    \
    d = rotate(d ^ a, 16u);                                                    \
    c += d;                                                                    \
    b = rotate(b ^ c, 12u);                                                    \
    a += b;                                                                    \
    d = rotate(d ^ a, 8u);                                                     \
    c += d;                                                                    \
    b = rotate(b ^ c, 7u);

/* F: in = (prev ^ k) + rotl(ref, 16); out = chacha8(in) + in. */
static uint16 label_f(uint16 k, uint16 prev, uint16 ref)
{
    uint16 in = (prev ^ k) + rotate(ref, (uint16)(16u));
    uint x0 = in.s0, x1 = in.s1, x2 = in.s2, x3 = in.s3;
    uint x4 = in.s4, x5 = in.s5, x6 = in.s6, x7 = in.s7;
    uint x8 = in.s8, x9 = in.s9, x10 = in.sa, x11 = in.sb;
    uint x12 = in.sc, x13 = in.sd, x14 = in.se, x15 = in.sf;
    for (int i = 0; i < 4; i++) {
        QR(x0, x4, x8, x12)
        QR(x1, x5, x9, x13)
        QR(x2, x6, x10, x14)
        QR(x3, x7, x11, x15)
        QR(x0, x5, x10, x15)
        QR(x1, x6, x11, x12)
        QR(x2, x7, x8, x13)
        QR(x3, x4, x9, x14)
    }
    uint16 x = (uint16)(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12,
                        x13, x14, x15);
    return x + in;
}

__kernel void challenge_label(__global uint16 *labels, const uint8 seed,
                              const ulong lanes, const uint steps,
                              const uint segment)
{
    ulong l = get_global_id(0);
    if (l >= lanes)
        return;
    ulong t0 = (ulong)segment * steps;
    uint16 k = (uint16)(seed, (uint8)(0u, 0u, 0x6867696eu, 0x69687374u,
                                      0x6c2f7466u, 0x6c656261u, 0x3176u, 0u));
    uint16 prev = t0 ? labels[(t0 - 1) * lanes + l] : (uint16)(0u);
    for (uint j = 0; j < steps; j++) {
        ulong t = t0 + j;
        ulong v = t * lanes + l;
        uint16 ref = (uint16)(0u);
        if (t > 0) {
            ulong x = (ulong)prev.s0 | ((ulong)prev.s1 << 32);
            ulong r =
                segment == 0 ? mul_hi(x, t) * lanes + l : mul_hi(x, t0 * lanes);
            ref = labels[r];
        }
        k.s8 = (uint)v;
        k.s9 = (uint)(v >> 32);
        prev = label_f(k, prev, ref);
        labels[v] = prev;
    }
}

/* ---- BLAKE2b-256 ------------------------------------------------------ */

__constant ulong B2_IV[8] = {0x6a09e667f3bcc908UL, 0xbb67ae8584caa73bUL,
                             0x3c6ef372fe94f82bUL, 0xa54ff53a5f1d36f1UL,
                             0x510e527fade682d1UL, 0x9b05688c2b3e6c1fUL,
                             0x1f83d9abfb41bd6bUL, 0x5be0cd19137e2179UL};

__constant uchar B2_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

#define B2_G(r, i, a, b, c, d)                                                 \
    a = a + b + m[B2_SIGMA[r][2 * i]];                                         \
    d = rotate(d ^ a, 32UL);                                                   \
    c = c + d;                                                                 \
    b = rotate(b ^ c, 40UL);                                                   \
    a = a + b + m[B2_SIGMA[r][2 * i + 1]];                                     \
    d = rotate(d ^ a, 48UL);                                                   \
    c = c + d;                                                                 \
    b = rotate(b ^ c, 1UL);

static void b2_compress(ulong *h, const ulong *m, ulong t, int last)
{
    ulong v0 = h[0], v1 = h[1], v2 = h[2], v3 = h[3];
    ulong v4 = h[4], v5 = h[5], v6 = h[6], v7 = h[7];
    ulong v8 = B2_IV[0], v9 = B2_IV[1], v10 = B2_IV[2], v11 = B2_IV[3];
    ulong v12 = B2_IV[4] ^ t, v13 = B2_IV[5];
    ulong v14 = last ? ~B2_IV[6] : B2_IV[6], v15 = B2_IV[7];
#pragma unroll
    for (int r = 0; r < 12; r++) {
        B2_G(r, 0, v0, v4, v8, v12)
        B2_G(r, 1, v1, v5, v9, v13)
        B2_G(r, 2, v2, v6, v10, v14)
        B2_G(r, 3, v3, v7, v11, v15)
        B2_G(r, 4, v0, v5, v10, v15)
        B2_G(r, 5, v1, v6, v11, v12)
        B2_G(r, 6, v2, v7, v8, v13)
        B2_G(r, 7, v3, v4, v9, v14)
    }
    h[0] ^= v0 ^ v8;
    h[1] ^= v1 ^ v9;
    h[2] ^= v2 ^ v10;
    h[3] ^= v3 ^ v11;
    h[4] ^= v4 ^ v12;
    h[5] ^= v5 ^ v13;
    h[6] ^= v6 ^ v14;
    h[7] ^= v7 ^ v15;
}

static void b2_init(ulong *h)
{
    for (int i = 0; i < 8; i++)
        h[i] = B2_IV[i];
    h[0] ^= 0x01010000UL ^ 32UL; /* digest 32 bytes, no key */
}

/* Message words of tag || data (data as little-endian words): word w is
 * the top byte of data word w - 1 (the tag for w = 0) and the low seven
 * bytes of data word w. */
__kernel void challenge_label_leaves(__global const ulong *labels,
                                     __global ulong *nodes,
                                     const ulong n_chunks)
{
    ulong c = get_global_id(0);
    if (c >= n_chunks)
        return;
    __global const ulong *w = labels + c * 512; /* 4096 bytes */
    ulong h[8], m[16];
    ulong carry = 0; /* leaf tag 0x00 */
    b2_init(h);
    for (uint b = 0; b < 33; b++) {
        for (uint i = 0; i < 16; i++) {
            uint idx = b * 16 + i;
            ulong cur = idx < 512 ? w[idx] : 0;
            m[i] = carry | (cur << 8);
            carry = cur >> 56;
        }
        b2_compress(h, m, b == 32 ? 4097UL : (ulong)(b + 1) * 128, b == 32);
    }
    for (int i = 0; i < 4; i++)
        nodes[c * 4 + i] = h[i];
}

__kernel void challenge_label_nodes(__global ulong *tree, const ulong below,
                                    const ulong n_below, const ulong above)
{
    ulong i = get_global_id(0);
    if (i >= (n_below + 1) / 2)
        return;
    __global const ulong *src = tree + (below + 2 * i) * 4;
    __global ulong *dst = tree + (above + i) * 4;
    if (2 * i + 1 >= n_below) {
        for (int j = 0; j < 4; j++)
            dst[j] = src[j];
        return;
    }
    ulong h[8], m[16];
    ulong carry = 1; /* node tag 0x01 */
    b2_init(h);
    for (uint j = 0; j < 16; j++) {
        ulong cur = j < 8 ? src[j] : 0;
        m[j] = carry | (cur << 8);
        carry = cur >> 56;
    }
    b2_compress(h, m, 65, 1);
    for (int j = 0; j < 4; j++)
        dst[j] = h[j];
}
