/*
 * kpax/proto/_varint.h -- the size of a v2 record's zigzag varint, shared by
 * the two C extensions (kpax.proto._speedups encodes records with it,
 * kpax.producer._sendpath counts their sizes with it).
 *
 * Imports: stdint.h and Python.h (for Py_ssize_t), included first by the user.
 */
#ifndef KPAX_VARINT_H
#define KPAX_VARINT_H

/* Bytes of the zigzag varint (or varlong) of v. */
static inline Py_ssize_t
varint_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

#endif
