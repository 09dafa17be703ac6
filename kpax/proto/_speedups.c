/*
 * kpax.proto._speedups -- the RecordBatch v2 record loops in C.
 *
 * Role: optional accelerator for kpax.proto.records.v2. It holds the same two
 * hot loops as the pure-Python module, with the same inputs, outputs and
 * errors, so that kpax behaves identically with or without it (the test suite
 * checks both against each other, and fuzzes both):
 *
 *   encode_records(timestamps, keys, values, headers, base_timestamp) -> bytes
 *       The records section (uncompressed) of a v2 batch, offset deltas 0..n-1.
 *
 *   parse_records(buf, pos, end, count, base_offset, base_timestamp,
 *                 template=None, slots=None, timestamp=None, min_offset=None) -> list
 *       Decode `count` records from buf[pos:end]. Without a template each row is
 *       (offset, timestamp, key, value, headers). With one, each row is a copy of
 *       `template` (a tuple, or an instance of a tuple subclass such as a
 *       NamedTuple) with the five values put at the indexes given by `slots`.
 *       `timestamp` (an int) replaces every record's timestamp (log-append time);
 *       records with an offset below `min_offset` are skipped.
 *
 *   encode_produce(version, correlation_id, client_id, transactional_id, acks,
 *                  timeout_ms, topics) -> bytes
 *   decode_produce_response(frame, version) -> (throttle_ms, rows)
 *       The producer's Produce request frame and response, the well-formed
 *       common case; NotImplemented for anything else, and the caller runs the
 *       Python reference (kpax.proto.produce_wire), which answers or raises.
 *
 *   lz4_decode_blocks(data, pos, max_block, block_checksum, max_size) -> bytes | None
 *       An LZ4 frame's independent blocks decoded (None: more than max_size).
 *
 *   lz4_frame(data, header) -> bytes
 *       An LZ4 frame as kpax.proto.compression writes it for Kafka: `header`,
 *       then independent 64 KiB blocks from kpax's own block compressor
 *       (stored when they would not shrink), then the end mark.
 *
 *   walk_batches(data, validate_crc, check_records, min_offset=None, borrow=False)
 *       -> (buf, list, stop)
 *       The consumer's framing and checks of a partition's fetched batches (CRC-32C,
 *       headers, records of uncompressed batches) in one call; it stops at the
 *       first batch it does not take as good and the Python walk goes on from there.
 *
 *   walk_many(datas, min_offsets, validate_crc, check_records, borrow) -> list
 *       walk_batches over a Fetch response's partitions in one call, with the
 *       GIL released once for them all when they are large.
 *
 *   frame_buffer(size) -> bytearray
 *       `size` bytes not initialised: a large response frame's buffer, which the
 *       socket fills (kpax.proto.framing).
 *
 *   crc32c(data, value=0) -> int
 *       CRC-32C (Castagnoli) of a bytes-like object, continuing from `value`:
 *       the SSE4.2 crc32 instruction where the CPU has it (checked at import),
 *       three streams at once over large inputs, else slicing-by-8 tables.
 *
 * Every malformed input raises kpax.proto.errors.CorruptRecordError naming the
 * byte offset; every read is bounded by the record's own length and `end`.
 *
 * Imports: Python's C API; kpax.proto.errors (for CorruptRecordError) at import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* PyMemberDef, T_OBJECT_EX, READONLY */

/* Work on fewer bytes than this keeps the GIL: releasing and taking it back
 * costs two futex calls and, when another thread is waiting, a switch to it and
 * back (tens of microseconds on a busy 2-core machine), far more than copying
 * or checksumming 16 KiB (~3 us). A producer's caller thread seals a 16 KiB
 * batch per ~130 records: each needless release handed the GIL to the I/O
 * thread mid-seal. Larger buffers (big batches, fetched data) still let other
 * threads run meanwhile. */
#define NOGIL_MIN (256 * 1024)
#include <stdint.h>
#include <string.h>

static PyObject *CorruptRecordError = NULL;
static PyObject *EmptyTuple = NULL;

/* ------------------------------------------------------------------ varints */

#include "_varint.h" /* varint_size */

static inline char *
write_varint(char *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        *p++ = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    *p++ = (char)z;
    return p;
}

/* Read a zigzag varint at p[*pos] without passing `limit`.
 * 0 on success; -1 if the data ends inside it; -2 if it is longer than
 * 10 bytes or does not fit 64 bits. */
static inline int
read_varint(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t limit, int64_t *out)
{
    Py_ssize_t i = *pos;
    if (i < limit && p[i] < 0x80) {
        uint8_t b = p[i];
        *out = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        *pos = i + 1;
        return 0;
    }
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t start = i;
    for (;;) {
        if (i >= limit)
            return -1;
        uint8_t b = p[i++];
        if (shift == 63 && b > 1)
            return -2;
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (i - start >= 10)
            return -2;
    }
    *pos = i;
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return 0;
}

/* ------------------------------------------------------------------ encoding */

/* Length of a key/value/header value: -1 for None. Sets *data. */
static int
blob_view(PyObject *obj, const char **data, Py_ssize_t *len, Py_buffer *view, int *has_view)
{
    *has_view = 0;
    if (obj == Py_None) {
        *data = NULL;
        *len = -1;
        return 0;
    }
    if (PyBytes_CheckExact(obj)) {
        *data = PyBytes_AS_STRING(obj);
        *len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "record keys and values must be bytes-like or None, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *has_view = 1;
    *data = (const char *)view->buf;
    *len = view->len;
    return 0;
}

static Py_ssize_t
blob_size(PyObject *obj)
{
    const char *data;
    Py_ssize_t len;
    Py_buffer view;
    int has_view;
    if (blob_view(obj, &data, &len, &view, &has_view) < 0)
        return -2;
    if (has_view)
        PyBuffer_Release(&view);
    return len;
}

static char *
changed_size(void)
{
    PyErr_SetString(PyExc_RuntimeError,
                    "encode_records: a key, value or header changed size while encoding");
    return NULL;
}

/* Every write is bounded by `end`: the objects were measured in an earlier pass
 * and a bytearray can be resized between the two. */
static char *
write_blob(char *p, char *end, PyObject *obj)
{
    const char *data;
    Py_ssize_t len;
    Py_buffer view;
    int has_view;
    if (blob_view(obj, &data, &len, &view, &has_view) < 0)
        return NULL;
    if (varint_size(len) + (len > 0 ? len : 0) > end - p) {
        if (has_view)
            PyBuffer_Release(&view);
        return changed_size();
    }
    p = write_varint(p, len);
    if (len > 0) {
        memcpy(p, data, (size_t)len);
        p += len;
    }
    if (has_view)
        PyBuffer_Release(&view);
    return p;
}

/* An immutable copy of one record's headers: a tuple of (str, value) 2-tuples,
 * holding its own references (running the caller's __iter__ here, once, so that
 * no Python code runs between measuring and writing). New reference or NULL. */
static PyObject *
headers_snapshot(PyObject *hdrs)
{
    PyObject *seq = PySequence_Tuple(hdrs);
    if (seq == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_SetString(PyExc_TypeError, "record headers must be a sequence of (str, bytes) pairs");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(seq, i);
        if (!(PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) &&
            !(PyList_Check(pair) && PyList_GET_SIZE(pair) == 2)) {
            PyErr_SetString(PyExc_TypeError, "a record header must be a (str, bytes | None) pair");
            goto fail;
        }
        PyObject *hkey = PySequence_Fast_GET_ITEM(pair, 0);
        PyObject *hval = PySequence_Fast_GET_ITEM(pair, 1);
        if (!PyUnicode_Check(hkey)) {
            PyErr_Format(PyExc_TypeError, "a record header key must be str, not %.100s",
                         Py_TYPE(hkey)->tp_name);
            goto fail;
        }
        PyObject *copy = PyTuple_Pack(2, hkey, hval);
        if (copy == NULL)
            goto fail;
        PyTuple_SET_ITEM(out, i, copy);
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(seq);
    return NULL;
}

/* Size of one record's headers section (a snapshot), or -1 with an exception set. */
static Py_ssize_t
headers_size(PyObject *snap)
{
    Py_ssize_t n = PyTuple_GET_SIZE(snap);
    Py_ssize_t size = varint_size(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(snap, i);
        Py_ssize_t klen;
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &klen) == NULL)
            return -1;
        Py_ssize_t vlen = blob_size(PyTuple_GET_ITEM(pair, 1));
        if (vlen == -2)
            return -1;
        size += varint_size(klen) + klen + varint_size(vlen) + (vlen > 0 ? vlen : 0);
    }
    return size;
}

static char *
write_headers(char *p, char *end, PyObject *snap)
{
    Py_ssize_t n = PyTuple_GET_SIZE(snap);
    if (varint_size(n) > end - p)
        return changed_size();
    p = write_varint(p, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(snap, i);
        Py_ssize_t klen;
        const char *kdata = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &klen);
        if (kdata == NULL)
            return NULL;
        if (varint_size(klen) + klen > end - p)
            return changed_size();
        p = write_varint(p, klen);
        memcpy(p, kdata, (size_t)klen);
        p += klen;
        p = write_blob(p, end, PyTuple_GET_ITEM(pair, 1));
        if (p == NULL)
            return NULL;
    }
    return p;
}

/* A plain key or value (bytes or None): copied without the GIL when the batch is big. */
typedef struct {
    const char *data;
    Py_ssize_t len; /* -1: None */
} Plain;

/* The records section of columns, after ``reserve`` bytes left for the caller
 * (a batch header); ``*max_ts`` gets the largest timestamp. When every key and
 * value is bytes or None and there are no headers, the copy loop touches no
 * Python object, and runs with the GIL released from NOGIL_MIN bytes: the
 * tuples made below keep those immutable objects alive. */
static PyObject *
encode_records_impl(PyObject *ts_in, PyObject *keys_in, PyObject *values_in, PyObject *headers_in,
                    long long base_ts, Py_ssize_t reserve, int64_t *max_ts)
{
    PyObject *tss = NULL, *keys = NULL, *values = NULL, *hdrs = NULL, *snaps = NULL, *out = NULL;
    int64_t *deltas = NULL;
    Py_ssize_t *bodies = NULL;
    Plain *plain = NULL;
    int64_t top = INT64_MIN;

    /* Tuples, not PySequence_Fast: a list could be changed by Python code run below
     * (a timestamp's __index__, a headers iterable's __iter__) under our feet. */
    if ((tss = PySequence_Tuple(ts_in)) == NULL || (keys = PySequence_Tuple(keys_in)) == NULL ||
        (values = PySequence_Tuple(values_in)) == NULL)
        goto done;
    if (headers_in != Py_None) {
        hdrs = PySequence_Tuple(headers_in);
        if (hdrs == NULL)
            goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    if (PySequence_Fast_GET_SIZE(tss) != n || PySequence_Fast_GET_SIZE(keys) != n ||
        (hdrs != NULL && PySequence_Fast_GET_SIZE(hdrs) != n)) {
        PyErr_SetString(PyExc_ValueError,
                        "timestamps, keys, values and headers must have the same length");
        goto done;
    }
    deltas = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    bodies = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    if (deltas == NULL || bodies == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject **ts_items = PySequence_Fast_ITEMS(tss);
    PyObject **key_items = PySequence_Fast_ITEMS(keys);
    PyObject **value_items = PySequence_Fast_ITEMS(values);
    PyObject **hdr_items = hdrs != NULL ? PySequence_Fast_ITEMS(hdrs) : NULL;
    if (hdr_items != NULL && (snaps = PyTuple_New(n)) == NULL)
        goto done;
    /* Pass 1: everything that may run Python code. */
    for (Py_ssize_t i = 0; i < n; i++) {
        long long t = PyLong_AsLongLong(ts_items[i]);
        if (t == -1 && PyErr_Occurred())
            goto done;
        int64_t d;
        if (__builtin_sub_overflow((int64_t)t, (int64_t)base_ts, &d)) {
            PyErr_Format(PyExc_ValueError, "record %zd: timestamp %lld is too far from %lld", i, t,
                         base_ts);
            goto done;
        }
        deltas[i] = d;
        if ((int64_t)t > top)
            top = (int64_t)t;
        if (hdr_items != NULL) {
            PyObject *snap = hdr_items[i] == Py_None ? PyTuple_New(0) : headers_snapshot(hdr_items[i]);
            if (snap == NULL)
                goto done;
            PyTuple_SET_ITEM(snaps, i, snap);
        }
    }
    if (max_ts != NULL)
        *max_ts = top;
    /* Pass 2: sizes (and whether the copy can run without the GIL). */
    if (hdr_items == NULL && n > 0) {
        plain = PyMem_Malloc(sizeof(Plain) * 2 * (size_t)n);
        if (plain == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n && plain != NULL; i++) {
            PyObject *objs[2] = {key_items[i], value_items[i]};
            for (int j = 0; j < 2; j++) {
                PyObject *o = objs[j];
                if (o == Py_None) {
                    plain[2 * i + j].data = NULL;
                    plain[2 * i + j].len = -1;
                }
                else if (PyBytes_CheckExact(o)) {
                    plain[2 * i + j].data = PyBytes_AS_STRING(o);
                    plain[2 * i + j].len = PyBytes_GET_SIZE(o);
                }
                else {
                    PyMem_Free(plain);
                    plain = NULL;
                    break;
                }
            }
        }
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t d = deltas[i];
        Py_ssize_t kl = blob_size(key_items[i]);
        if (kl == -2)
            goto done;
        Py_ssize_t vl = blob_size(value_items[i]);
        if (vl == -2)
            goto done;
        Py_ssize_t hs = 1;
        if (snaps != NULL) {
            hs = headers_size(PyTuple_GET_ITEM(snaps, i));
            if (hs < 0)
                goto done;
        }
        Py_ssize_t body = 1 + varint_size(d) + varint_size(i) + varint_size(kl) + (kl > 0 ? kl : 0) +
                          varint_size(vl) + (vl > 0 ? vl : 0) + hs;
        bodies[i] = body;
        total += varint_size(body) + body;
    }
    out = PyBytes_FromStringAndSize(NULL, reserve + total);
    if (out == NULL)
        goto done;
    if (reserve > 0)
        memset(PyBytes_AS_STRING(out), 0, (size_t)reserve);
    char *p = PyBytes_AS_STRING(out) + reserve;
    if (plain != NULL) {
        /* Pass 3, plain: sizes are exact (immutable bytes), no Python object is
         * touched, so other threads run meanwhile. */
        PyThreadState *saved = total >= NOGIL_MIN ? PyEval_SaveThread() : NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            p = write_varint(p, bodies[i]);
            *p++ = 0; /* attributes */
            p = write_varint(p, deltas[i]);
            p = write_varint(p, i);
            for (int j = 0; j < 2; j++) {
                const Plain *b = &plain[2 * i + j];
                p = write_varint(p, b->len);
                if (b->len > 0) {
                    memcpy(p, b->data, (size_t)b->len);
                    p += b->len;
                }
            }
            *p++ = 0; /* no headers */
        }
        if (saved != NULL)
            PyEval_RestoreThread(saved);
        goto check;
    }
    /* Pass 3: bytes, every write bounded by its record's end. */
    for (Py_ssize_t i = 0; i < n; i++) {
        /* p is exactly where pass 2 put this record (checked below), and its fixed
         * part (length, attributes, deltas) was measured from C values only */
        char *rec_end = p + varint_size(bodies[i]) + bodies[i];
        p = write_varint(p, bodies[i]);
        *p++ = 0; /* attributes */
        p = write_varint(p, deltas[i]);
        p = write_varint(p, i);
        p = write_blob(p, rec_end, key_items[i]);
        if (p == NULL)
            goto fail;
        p = write_blob(p, rec_end, value_items[i]);
        if (p == NULL)
            goto fail;
        if (snaps != NULL) {
            p = write_headers(p, rec_end, PyTuple_GET_ITEM(snaps, i));
            if (p == NULL)
                goto fail;
        }
        else if (p < rec_end) {
            *p++ = 0;
        }
        if (p != rec_end) {
            changed_size();
            goto fail;
        }
    }
check:
    if (p != PyBytes_AS_STRING(out) + reserve + total) {
        PyErr_SetString(PyExc_RuntimeError,
                        "encode_records: a key, value or header changed size while encoding");
        goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyMem_Free(deltas);
    PyMem_Free(bodies);
    PyMem_Free(plain);
    Py_XDECREF(tss);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(hdrs);
    Py_XDECREF(snaps);
    return out;
}

static PyObject *
encode_records(PyObject *module, PyObject *args)
{
    PyObject *ts_in, *keys_in, *values_in, *headers_in;
    long long base_ts;
    if (!PyArg_ParseTuple(args, "OOOOL:encode_records", &ts_in, &keys_in, &values_in, &headers_in,
                          &base_ts))
        return NULL;
    return encode_records_impl(ts_in, keys_in, values_in, headers_in, base_ts, 0, NULL);
}

static uint32_t crc32c_update(uint32_t c, const uint8_t *p, size_t n);

static inline void
put_be64(char *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p[i] = (char)(u & 0xff);
        u >>= 8;
    }
}

static inline void
put_be32(char *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (char)(u >> 24);
    p[1] = (char)(u >> 16);
    p[2] = (char)(u >> 8);
    p[3] = (char)u;
}

static inline void
put_be16(char *p, int16_t v)
{
    uint16_t u = (uint16_t)v;
    p[0] = (char)(u >> 8);
    p[1] = (char)u;
}

#define BATCH_HEADER 61

/* Fill the 61-byte RecordBatch v2 header at the start of out (records or their
 * compressed form follow it) and its CRC-32C, the CRC without the GIL from
 * NOGIL_MIN bytes. Returns out, or NULL (out released) past 2 GiB. */
static PyObject *
finish_batch(PyObject *out, Py_ssize_t n, long long base_ts, int64_t max_ts,
             long long base_offset, int attributes, long long producer_id, int producer_epoch,
             int base_sequence, int leader_epoch)
{
    char *h = PyBytes_AS_STRING(out);
    Py_ssize_t size = PyBytes_GET_SIZE(out);
    if (size - 12 > INT32_MAX) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_OverflowError, "encode_batch: batch larger than 2 GiB");
        return NULL;
    }
    put_be64(h, (int64_t)base_offset);
    put_be32(h + 8, (int32_t)(size - 12));
    put_be32(h + 12, (int32_t)leader_epoch);
    h[16] = 2; /* magic */
    /* h[17..20]: CRC, below */
    put_be16(h + 21, (int16_t)attributes);
    put_be32(h + 23, (int32_t)(n - 1)); /* last offset delta */
    put_be64(h + 27, (int64_t)base_ts);
    put_be64(h + 35, max_ts);
    put_be64(h + 43, (int64_t)producer_id);
    put_be16(h + 51, (int16_t)producer_epoch);
    put_be32(h + 53, (int32_t)base_sequence);
    put_be32(h + 57, (int32_t)n);
    uint32_t c;
    if (size >= NOGIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        c = ~crc32c_update(~(uint32_t)0, (const uint8_t *)h + 21, (size_t)(size - 21));
        Py_END_ALLOW_THREADS
    }
    else {
        c = ~crc32c_update(~(uint32_t)0, (const uint8_t *)h + 21, (size_t)(size - 21));
    }
    put_be32(h + 17, (int32_t)c);
    return out;
}

/* A whole uncompressed RecordBatch v2 (header, CRC-32C, records) from columns:
 * encode_records + assemble_batch in one buffer, the copy and the CRC without
 * the GIL from NOGIL_MIN bytes. */
static PyObject *
encode_batch(PyObject *module, PyObject *args)
{
    PyObject *ts_in, *keys_in, *values_in, *headers_in;
    long long base_ts, base_offset, producer_id;
    int attributes, producer_epoch, base_sequence, leader_epoch;
    if (!PyArg_ParseTuple(args, "OOOOLLiLiii:encode_batch", &ts_in, &keys_in, &values_in,
                          &headers_in, &base_ts, &base_offset, &attributes, &producer_id,
                          &producer_epoch, &base_sequence, &leader_epoch))
        return NULL;
    Py_ssize_t n = PyObject_Length(values_in);
    if (n < 0)
        return NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "encode_batch: no records");
        return NULL;
    }
    int64_t max_ts = INT64_MIN;
    PyObject *out = encode_records_impl(ts_in, keys_in, values_in, headers_in, base_ts,
                                        BATCH_HEADER, &max_ts);
    if (out == NULL)
        return NULL;
    return finish_batch(out, n, base_ts, max_ts, base_offset, attributes, producer_id,
                        producer_epoch, base_sequence, leader_epoch);
}

/* ------------------------------------------------------------------ decoding */

static PyObject *
int_plus(int64_t base, int64_t delta)
{
    int64_t r;
    if (!__builtin_add_overflow(base, delta, &r))
        return PyLong_FromLongLong(r);
    /* Python semantics: an int beyond 64 bits */
    PyObject *a = PyLong_FromLongLong(base), *b = PyLong_FromLongLong(delta), *s = NULL;
    if (a != NULL && b != NULL)
        s = PyNumber_Add(a, b);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return s;
}

static int
corrupt(const char *fmt, ...)
{
    va_list vargs;
    va_start(vargs, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, vargs);
    va_end(vargs);
    if (msg != NULL) {
        PyErr_SetObject(CorruptRecordError, msg);
        Py_DECREF(msg);
    }
    return -1;
}

/* Headers of one record at p[*pos], bounded by `limit`. New reference or NULL. */
static PyObject *
parse_headers(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t limit, Py_ssize_t where)
{
    int64_t count;
    Py_ssize_t i = *pos;
    if (read_varint(p, &i, limit, &count) < 0) {
        corrupt("record at byte %zd has a bad header count varint", where);
        return NULL;
    }
    if (count < 0 || count > limit - i) {
        corrupt("record at byte %zd has a bad header count %lld", where, (long long)count);
        return NULL;
    }
    PyObject *out = PyTuple_New((Py_ssize_t)count);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t h = 0; h < (Py_ssize_t)count; h++) {
        int64_t kl, vl;
        if (read_varint(p, &i, limit, &kl) < 0 || kl < 0 || kl > limit - i) {
            corrupt("record at byte %zd has a bad header key length", where);
            goto fail;
        }
        PyObject *hkey = PyUnicode_DecodeUTF8((const char *)p + i, (Py_ssize_t)kl, "strict");
        if (hkey == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                corrupt("record at byte %zd has a header key that is not UTF-8", where);
            }
            goto fail;
        }
        i += (Py_ssize_t)kl;
        if (read_varint(p, &i, limit, &vl) < 0 || vl < -1 || vl > limit - i) {
            Py_DECREF(hkey);
            corrupt("record at byte %zd has a bad header value length", where);
            goto fail;
        }
        PyObject *hval;
        if (vl == -1) {
            hval = Py_None;
            Py_INCREF(hval);
        }
        else {
            hval = PyBytes_FromStringAndSize((const char *)p + i, (Py_ssize_t)vl);
            if (hval == NULL) {
                Py_DECREF(hkey);
                goto fail;
            }
            i += (Py_ssize_t)vl;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(hkey);
            Py_DECREF(hval);
            goto fail;
        }
        PyTuple_SET_ITEM(pair, 0, hkey);
        PyTuple_SET_ITEM(pair, 1, hval);
        PyObject_GC_UnTrack(pair); /* str and bytes: no cycle through it */
        PyTuple_SET_ITEM(out, h, pair);
    }
    PyObject_GC_UnTrack(out);
    *pos = i;
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* A blob (key or value) of length varint at p[*pos]: bytes, None (-1 or !build), or NULL. */
static PyObject *
parse_blob(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t limit, Py_ssize_t where, const char *what,
           int build)
{
    int64_t len;
    Py_ssize_t i = *pos;
    int rc = read_varint(p, &i, limit, &len);
    if (rc < 0 || len < -1 || len > limit - i) {
        if (rc < 0)
            corrupt("record at byte %zd has a bad %s length varint", where, what);
        else
            corrupt("record at byte %zd has a bad %s length %lld (%zd bytes left in the record)",
                    where, what, (long long)len, limit - i);
        return NULL;
    }
    if (len == -1) {
        *pos = i;
        Py_RETURN_NONE;
    }
    *pos = i + (Py_ssize_t)len;
    if (!build)
        Py_RETURN_NONE; /* checked only (scan_records) */
    return PyBytes_FromStringAndSize((const char *)p + i, (Py_ssize_t)len);
}

/* ------------------------------------------------------------------ record types */

/* adopt_record(type, nfields): the consumer's record types (NamedTuples of
 * nfields fields, kpax.consumer.record) made cheaper to build, read and free,
 * keeping every behaviour of a NamedTuple:
 *   - their instances are allocated with at least nfields item slots (the slots
 *     past a short tuple's own stay NULL), so a field can be read from a fixed
 *     place in any instance, even one made short by tuple.__new__;
 *   - so each field becomes a read-only member descriptor at its slot (instead
 *     of the NamedTuple's tuple-getter), which CPython's specialising
 *     interpreter (3.11+) reads as directly as an attribute of a __slots__
 *     class; a slot past a short instance's end raises AttributeError;
 *   - records of the exact type freed go to a free list of their own (as exact
 *     tuples do in CPython), which parse_records takes from: no allocation, and
 *     no count towards the cyclic GC's next collection, for most records.
 * Only the type's tp_alloc and tp_dealloc and its field attributes change; its
 * subclasses (which CPython gives its generic dealloc) free through it too.
 * Adopt a type right after making it, before any instance exists (one made
 * before could be short of slots), and each subclass as it is made (its
 * __init_subclass__ calls adopt_record on it: the allocator alone changes). */
#define RECORD_FREE_MAX 16384
#define RECORD_TYPES_MAX 4
typedef struct {
    PyTypeObject *type; /* a strong reference: adopted for the process's life */
    Py_ssize_t nfields;
    Py_ssize_t nfree;
    PyObject **free;
    PyMemberDef *members;
} RecordType;
static RecordType record_types[RECORD_TYPES_MAX];
static int n_record_types;

static RecordType *
record_type_of(PyTypeObject *type)
{
    for (PyTypeObject *t = type; t != NULL; t = t->tp_base)
        for (int i = 0; i < n_record_types; i++)
            if (record_types[i].type == t)
                return &record_types[i];
    return NULL;
}

/* A new record of type rt->type with n items, not tracked by the GC; from the
 * free list when it has one of that size. The items are NULL, or with zero=0
 * left as they are for the caller to set every one at once. */
static PyObject *
record_new_untracked(RecordType *rt, PyTypeObject *type, Py_ssize_t n, int zero)
{
    if (type == rt->type && n == rt->nfields && rt->nfree > 0) {
        PyObject *op = rt->free[--rt->nfree];
        if (zero) /* (parse_records sets every item at once: no need) */
            memset(((PyTupleObject *)op)->ob_item, 0, sizeof(PyObject *) * (size_t)n);
        return (PyObject *)PyObject_InitVar((PyVarObject *)op, type, n);
    }
    Py_ssize_t slots = n < rt->nfields ? rt->nfields : n;
    PyObject *op = PyType_GenericAlloc(type, slots);
    if (op == NULL)
        return NULL;
    Py_SET_SIZE(op, n);
    PyObject_GC_UnTrack(op);
    return op;
}

static PyObject *
record_alloc(PyTypeObject *type, Py_ssize_t n)
{
    RecordType *rt = record_type_of(type);
    if (rt == NULL) /* cannot happen: only adopted types and their subclasses have it */
        return PyType_GenericAlloc(type, n);
    if (n < rt->nfields && type->tp_dictoffset != 0) {
        /* a subclass with a __dict__ keeps it after its last item, where a field
         * of a short instance would be read */
        PyErr_Format(PyExc_TypeError, "%.100s needs its %zd fields, not %zd", type->tp_name,
                     rt->nfields, n);
        return NULL;
    }
    PyObject *op = record_new_untracked(rt, type, n, 1);
    if (op != NULL)
        PyObject_GC_Track(op); /* as PyType_GenericAlloc leaves it */
    return op;
}

static void
record_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    if (PyObject_GC_IsTracked(op))
        PyObject_GC_UnTrack(op);
    Py_TRASHCAN_BEGIN(op, record_dealloc)
    Py_ssize_t n = Py_SIZE(op);
    PyObject **items = ((PyTupleObject *)op)->ob_item;
    while (--n >= 0)
        Py_XDECREF(items[n]);
    RecordType *rt = NULL;
    for (int i = 0; i < n_record_types; i++)
        if (record_types[i].type == type)
            rt = &record_types[i];
    if (rt != NULL && Py_SIZE(op) == rt->nfields && rt->nfree < RECORD_FREE_MAX)
        rt->free[rt->nfree++] = op;
    else
        type->tp_free(op);
    Py_DECREF(type); /* an instance's reference to its heap type */
    Py_TRASHCAN_END
}

static PyObject *
adopt_record(PyObject *module, PyObject *args)
{
    PyTypeObject *type;
    Py_ssize_t nfields;
    if (!PyArg_ParseTuple(args, "O!n:adopt_record", &PyType_Type, &type, &nfields))
        return NULL;
    RecordType *base = record_type_of(type);
    if (base != NULL) {
        /* A subclass (CPython gives each its generic allocator): its instances
         * need the slots their fields are read from too. */
        if (base->type != type && (type->tp_flags & Py_TPFLAGS_HEAPTYPE))
            type->tp_alloc = record_alloc;
        Py_RETURN_NONE;
    }
    PyObject *fields = PyObject_GetAttrString((PyObject *)type, "_fields");
    if (fields == NULL)
        return NULL;
    if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || type->tp_base != &PyTuple_Type ||
        type->tp_dictoffset != 0 || !PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != nfields ||
        nfields < 1) {
        Py_DECREF(fields);
        PyErr_SetString(PyExc_TypeError,
                        "adopt_record: a NamedTuple class (a direct tuple subclass, no __dict__) "
                        "and its number of fields are expected");
        return NULL;
    }
#ifdef Py_GIL_DISABLED
    /* the free list is guarded by the GIL: without one, the type is left as it is */
    Py_DECREF(fields);
    Py_RETURN_NONE;
#endif
    if (type->tp_itemsize != sizeof(PyObject *)) {
        Py_DECREF(fields);
        Py_RETURN_NONE;
    }
    if (n_record_types == RECORD_TYPES_MAX) {
        Py_DECREF(fields);
        PyErr_SetString(PyExc_RuntimeError, "adopt_record: too many record types");
        return NULL;
    }
    RecordType *rt = &record_types[n_record_types];
    rt->free = PyMem_Calloc(RECORD_FREE_MAX, sizeof(PyObject *));
    rt->members = PyMem_Calloc((size_t)nfields, sizeof(PyMemberDef));
    if (rt->free == NULL || rt->members == NULL) {
        Py_DECREF(fields);
        PyMem_Free(rt->free);
        PyMem_Free(rt->members);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nfields; i++) {
        PyObject *name = PyTuple_GET_ITEM(fields, i);
        const char *cname = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (cname == NULL)
            goto fail;
        /* member names must outlive the type: kept, as the type is */
        char *copy = PyMem_Malloc(strlen(cname) + 1);
        char *doc = PyMem_Malloc(48);
        if (copy == NULL || doc == NULL) {
            PyMem_Free(copy);
            PyMem_Free(doc);
            PyErr_NoMemory();
            goto fail;
        }
        strcpy(copy, cname);
        snprintf(doc, 48, "Alias for field number %zd", i);
        rt->members[i].name = copy;
        rt->members[i].type = T_OBJECT_EX;
        rt->members[i].offset = (Py_ssize_t)(offsetof(PyTupleObject, ob_item) + sizeof(PyObject *) * (size_t)i);
        rt->members[i].flags = READONLY;
        rt->members[i].doc = doc;
    }
    /* Allocation first: every instance made from now on has its nfields slots. */
    Py_INCREF(type);
    rt->type = type;
    rt->nfields = nfields;
    rt->nfree = 0;
    n_record_types++;
    type->tp_alloc = record_alloc;
    type->tp_dealloc = record_dealloc;
    for (Py_ssize_t i = 0; i < nfields; i++) {
        PyObject *descr = PyDescr_NewMember(type, &rt->members[i]);
        if (descr == NULL)
            goto fail_adopted;
        int rc = PyObject_SetAttr((PyObject *)type, PyTuple_GET_ITEM(fields, i), descr);
        Py_DECREF(descr);
        if (rc < 0)
            goto fail_adopted;
    }
    Py_DECREF(fields);
    Py_RETURN_NONE;
fail:
    for (Py_ssize_t i = 0; i < nfields; i++) {
        PyMem_Free((void *)rt->members[i].name);
        PyMem_Free((void *)rt->members[i].doc);
    }
    PyMem_Free(rt->free);
    PyMem_Free(rt->members);
    Py_DECREF(fields);
    return NULL;
fail_adopted: /* the type keeps working: a field left with its NamedTuple getter */
    Py_DECREF(fields);
    return NULL;
}

static PyObject *
parse_records(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"buf", "pos", "end", "count", "base_offset", "base_timestamp",
                             "template", "slots", "timestamp", "min_offset", NULL};
    Py_buffer view;
    Py_ssize_t pos, end, count;
    long long base_offset, base_ts;
    PyObject *template = Py_None, *slots = Py_None, *ts_override = Py_None, *min_off_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnnLL|OOOO:parse_records", kwlist, &view, &pos,
                                     &end, &count, &base_offset, &base_ts, &template, &slots,
                                     &ts_override, &min_off_obj))
        return NULL;
    PyObject *out = NULL;
    /* Records of a batch often share a timestamp: the same int object serves them. */
    int64_t last_tsd = 0;
    PyObject *last_ts = NULL;
    int gc_was_enabled = 0;
    Py_ssize_t row_len = 5;
    Py_ssize_t at[5] = {0, 1, 2, 3, 4};
    PyTypeObject *row_type = &PyTuple_Type;
    RecordType *rec_type = NULL; /* row_type's, when adopted (adopt_record) */
    long long min_offset = LLONG_MIN;
    /* Rows hold ints, bytes, str, None and untracked header tuples: none can be part
     * of a reference cycle, so the cyclic GC need not track them (it would otherwise
     * walk every row of a big fetch, possibly several times as they age). */
    int untrack = 1;

    if (pos < 0 || end > view.len || pos > end || count < 0) {
        PyErr_Format(PyExc_ValueError, "parse_records: bad bounds pos=%zd end=%zd count=%zd (buffer of %zd bytes)",
                     pos, end, count, view.len);
        goto done;
    }
    if (template != Py_None) {
        if (!PyTuple_Check(template) || !PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != 5) {
            PyErr_SetString(PyExc_TypeError, "parse_records: template must be a tuple and slots a 5-tuple of indexes");
            goto done;
        }
        row_len = PyTuple_GET_SIZE(template);
        for (int k = 0; k < 5; k++) {
            Py_ssize_t ix = PyLong_AsSsize_t(PyTuple_GET_ITEM(slots, k));
            if (ix == -1 && PyErr_Occurred())
                goto done;
            if (ix < 0 || ix >= row_len) {
                PyErr_SetString(PyExc_ValueError, "parse_records: a slot index is outside the template");
                goto done;
            }
            for (int j = 0; j < k; j++) {
                if (at[j] == ix) {
                    PyErr_SetString(PyExc_ValueError, "parse_records: the slot indexes must differ");
                    goto done;
                }
            }
            at[k] = ix;
        }
        row_type = Py_TYPE(template);
        rec_type = row_type->tp_alloc == record_alloc ? record_type_of(row_type) : NULL;
        if (row_type != &PyTuple_Type) {
            /* Rows are made as tuple.__new__(type(template), ...) would make them (the
             * pure-Python version does just that): refuse the types it refuses, such
             * as struct sequences (os.stat_result), whose instances are laid out
             * differently (hidden fields past the visible ones). */
            PyObject *probe = PyObject_CallMethod((PyObject *)&PyTuple_Type, "__new__", "O",
                                                  (PyObject *)row_type);
            if (probe == NULL)
                goto done;
            Py_DECREF(probe);
        }
        if (row_type->tp_dictoffset != 0)
            untrack = 0; /* instances with a __dict__ could join a cycle later */
        for (Py_ssize_t k = 0; k < row_len && untrack; k++)
            if (PyObject_GC_IsTracked(PyTuple_GET_ITEM(template, k)))
                untrack = 0;
    }
    if (ts_override != Py_None && !PyLong_Check(ts_override)) {
        PyErr_SetString(PyExc_TypeError, "parse_records: timestamp must be an int or None");
        goto done;
    }
    if (ts_override != Py_None && PyObject_GC_IsTracked(ts_override))
        untrack = 0; /* an int subclass with a __dict__ */
    if (min_off_obj != Py_None) {
        min_offset = PyLong_AsLongLong(min_off_obj);
        if (min_offset == -1 && PyErr_Occurred())
            goto done;
    }
    /* A record takes at least 7 bytes: a count beyond that is a lie, not an allocation. */
    if (count > (end - pos) / 7 + 1) {
        corrupt("batch declares %zd records but holds only %zd bytes of records (at byte %zd)", count,
                end - pos, pos);
        goto done;
    }
    /* The template's items that no slot replaces, copied into each row (the rest
     * are set from the record): indexes kept on the stack for usual templates. */
    Py_ssize_t keep[32];
    Py_ssize_t nkeep = -1; /* -1: copy every item, then replace the slots */
    if (template != Py_None && row_len <= 32 + 5) {
        nkeep = 0;
        for (Py_ssize_t k = 0; k < row_len; k++) {
            if (k != at[0] && k != at[1] && k != at[2] && k != at[3] && k != at[4])
                keep[nkeep++] = k;
        }
    }
    out = PyList_New(count);
    if (out == NULL)
        goto done;
    Py_ssize_t filled = 0;
    gc_was_enabled = PyGC_Disable();
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t start = pos;
    for (Py_ssize_t r = 0; r < count; r++) {
        start = pos;
        int64_t len, tsd, offd;
        int rc = read_varint(p, &pos, end, &len);
        if (rc == -1) {
            corrupt("record at byte %zd runs past the end of its batch (byte %zd)", start, end);
            goto fail;
        }
        if (rc < 0 || len < 6 || len > end - pos) {
            corrupt("record at byte %zd has a bad length %lld (%zd bytes remain)", start,
                    (long long)(rc < 0 ? -1 : len), end - pos);
            goto fail;
        }
        Py_ssize_t rec_end = pos + (Py_ssize_t)len;
        pos += 1; /* attributes (unused) */
        if (read_varint(p, &pos, rec_end, &tsd) < 0 || read_varint(p, &pos, rec_end, &offd) < 0) {
            corrupt("record at byte %zd has a bad timestamp or offset delta", start);
            goto fail;
        }
        int64_t off64;
        PyObject *off;
        if (__builtin_add_overflow((int64_t)base_offset, offd, &off64)) {
            off = int_plus(base_offset, offd);
            if (off == NULL)
                goto fail;
            off64 = offd < 0 ? LLONG_MIN : LLONG_MAX;
        }
        else {
            off = NULL;
        }
        PyObject *key = parse_blob(p, &pos, rec_end, start, "key", 1);
        if (key == NULL) {
            Py_XDECREF(off);
            goto fail;
        }
        PyObject *value = parse_blob(p, &pos, rec_end, start, "value", 1);
        if (value == NULL) {
            Py_XDECREF(off);
            Py_DECREF(key);
            goto fail;
        }
        PyObject *hdrs;
        if (pos < rec_end && p[pos] == 0) {
            hdrs = EmptyTuple;
            Py_INCREF(hdrs);
            pos += 1;
        }
        else {
            hdrs = parse_headers(p, &pos, rec_end, start);
            if (hdrs == NULL) {
                Py_XDECREF(off);
                Py_DECREF(key);
                Py_DECREF(value);
                goto fail;
            }
        }
        if (pos != rec_end) {
            Py_XDECREF(off);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(hdrs);
            corrupt("record at byte %zd: its fields end at byte %zd, its length says %zd", start, pos,
                    rec_end);
            goto fail;
        }
        if (off64 < min_offset) {
            Py_XDECREF(off);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(hdrs);
            continue;
        }
        if (off == NULL)
            off = PyLong_FromLongLong(off64);
        PyObject *ts;
        if (ts_override != Py_None) {
            ts = ts_override;
            Py_INCREF(ts);
        }
        else if (last_ts != NULL && tsd == last_tsd) {
            ts = last_ts;
            Py_INCREF(ts);
        }
        else {
            ts = int_plus(base_ts, tsd);
            if (ts != NULL) {
                Py_XDECREF(last_ts);
                last_ts = ts;
                last_tsd = tsd;
                Py_INCREF(last_ts);
            }
        }
        PyObject *row = NULL;
        if (off != NULL && ts != NULL) {
            if (row_type == &PyTuple_Type)
                row = PyTuple_New(row_len);
            else if (rec_type != NULL)
                row = record_new_untracked(rec_type, row_type, row_len, 0);
            else
                row = row_type->tp_alloc(row_type, row_len);
        }
        if (row == NULL) {
            Py_XDECREF(off);
            Py_XDECREF(ts);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(hdrs);
            goto fail;
        }
        if (nkeep >= 0) {
            for (Py_ssize_t k = 0; k < nkeep; k++) {
                PyObject *item = PyTuple_GET_ITEM(template, keep[k]);
                Py_INCREF(item);
                PyTuple_SET_ITEM(row, keep[k], item);
            }
        }
        else if (row_len != 5 || template != Py_None) {
            for (Py_ssize_t k = 0; k < row_len; k++) {
                PyObject *item = PyTuple_GET_ITEM(template, k);
                Py_INCREF(item);
                PyTuple_SET_ITEM(row, k, item);
            }
            for (int k = 0; k < 5; k++)
                Py_DECREF(PyTuple_GET_ITEM(row, at[k]));
        }
        PyTuple_SET_ITEM(row, at[0], off);
        PyTuple_SET_ITEM(row, at[1], ts);
        PyTuple_SET_ITEM(row, at[2], key);
        PyTuple_SET_ITEM(row, at[3], value);
        PyTuple_SET_ITEM(row, at[4], hdrs);
        if (rec_type != NULL) {
            if (!untrack)
                PyObject_GC_Track(row); /* made untracked */
        }
        else if (untrack) {
            PyObject_GC_UnTrack(row);
        }
        PyList_SET_ITEM(out, filled, row); /* the list's reference */
        filled++;
    }
    if (pos != end) {
        corrupt("batch declares %zd records but %zd bytes remain after them (at byte %zd)", count,
                end - pos, pos);
        goto fail;
    }
    if (filled < count && PyList_SetSlice(out, filled, count, NULL) < 0)
        goto fail;
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_XDECREF(last_ts);
    if (gc_was_enabled)
        PyGC_Enable();
    PyBuffer_Release(&view);
    return out;
}

/* scan_records: the checks parse_records makes on a records section, with no record
 * built (no offset, timestamp, key or value object; headers only when a record has
 * some, for their UTF-8 check): the number of records at or after min_offset, or the
 * same CorruptRecordError parse_records would raise. The consumer checks a fetched
 * batch with it on its I/O thread and builds the records later, on the thread that
 * reads them (kpax.consumer.fetcher). */
static PyObject *
scan_records(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, count;
    long long base_offset, min_offset = LLONG_MIN;
    PyObject *min_off_obj = Py_None;
    if (!PyArg_ParseTuple(args, "y*nnnL|O:scan_records", &view, &pos, &end, &count, &base_offset,
                          &min_off_obj))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t kept = 0;
    if (pos < 0 || end > view.len || pos > end || count < 0) {
        PyErr_Format(PyExc_ValueError, "scan_records: bad bounds pos=%zd end=%zd count=%zd (buffer of %zd bytes)",
                     pos, end, count, view.len);
        goto done;
    }
    if (min_off_obj != Py_None) {
        min_offset = PyLong_AsLongLong(min_off_obj);
        if (min_offset == -1 && PyErr_Occurred())
            goto done;
    }
    if (count > (end - pos) / 7 + 1) {
        corrupt("batch declares %zd records but holds only %zd bytes of records (at byte %zd)", count,
                end - pos, pos);
        goto done;
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    for (Py_ssize_t r = 0; r < count; r++) {
        Py_ssize_t start = pos;
        int64_t len, tsd, offd;
        int rc = read_varint(p, &pos, end, &len);
        if (rc == -1) {
            corrupt("record at byte %zd runs past the end of its batch (byte %zd)", start, end);
            goto done;
        }
        if (rc < 0 || len < 6 || len > end - pos) {
            corrupt("record at byte %zd has a bad length %lld (%zd bytes remain)", start,
                    (long long)(rc < 0 ? -1 : len), end - pos);
            goto done;
        }
        Py_ssize_t rec_end = pos + (Py_ssize_t)len;
        pos += 1; /* attributes (unused) */
        if (read_varint(p, &pos, rec_end, &tsd) < 0 || read_varint(p, &pos, rec_end, &offd) < 0) {
            corrupt("record at byte %zd has a bad timestamp or offset delta", start);
            goto done;
        }
        int64_t off64;
        if (__builtin_add_overflow((int64_t)base_offset, offd, &off64))
            off64 = offd < 0 ? LLONG_MIN : LLONG_MAX;
        if (parse_blob(p, &pos, rec_end, start, "key", 0) == NULL ||
            parse_blob(p, &pos, rec_end, start, "value", 0) == NULL)
            goto done; /* Py_None otherwise: immortal enough, no reference taken back */
        Py_DECREF(Py_None);
        Py_DECREF(Py_None);
        if (pos < rec_end && p[pos] == 0) {
            pos += 1;
        }
        else {
            PyObject *hdrs = parse_headers(p, &pos, rec_end, start);
            if (hdrs == NULL)
                goto done;
            Py_DECREF(hdrs);
        }
        if (pos != rec_end) {
            corrupt("record at byte %zd: its fields end at byte %zd, its length says %zd", start, pos,
                    rec_end);
            goto done;
        }
        if (off64 >= min_offset)
            kept++;
    }
    if (pos != end) {
        corrupt("batch declares %zd records but %zd bytes remain after them (at byte %zd)", count,
                end - pos, pos);
        goto done;
    }
    result = PyLong_FromSsize_t(kept);
done:
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ CRC-32C */

static uint32_t crc_table[8][256];
static int crc_hw = 0;

/* The hardware CRC runs three streams at once over three consecutive blocks (the
 * crc32 instruction takes 3 cycles but can start one every cycle), then joins them:
 * the register state after block A then block B is A's state moved over len(B)
 * zero bytes, XOR B's state from zero (the CRC is linear). Moving a state over
 * CRC_LONG or CRC_SHORT zero bytes is four table lookups (crc_shift). */
#define CRC_LONG 4096
#define CRC_SHORT 256
static uint32_t crc_long[4][256];
static uint32_t crc_short[4][256];

/* table[k][b]: the state (b << 8k) moved over n zero bytes. */
static void
crc_zeros_table(uint32_t table[4][256], size_t n)
{
    uint32_t basis[32];
    for (int i = 0; i < 32; i++) {
        uint32_t c = (uint32_t)1 << i;
        for (size_t z = 0; z < n; z++)
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
        basis[i] = c;
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t c = 0;
            for (int j = 0; j < 8; j++)
                if (b >> j & 1)
                    c ^= basis[8 * k + j];
            table[k][b] = c;
        }
}

static inline uint32_t
crc_shift(uint32_t table[4][256], uint32_t c)
{
    return table[0][c & 0xFF] ^ table[1][(c >> 8) & 0xFF] ^ table[2][(c >> 16) & 0xFF] ^
           table[3][c >> 24];
}

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
    if (crc_hw) {
        crc_zeros_table(crc_long, CRC_LONG);
        crc_zeros_table(crc_short, CRC_SHORT);
    }
#endif
}

static uint32_t
crc_sw(uint32_t c, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= c;
        c = crc_table[7][w & 0xFF] ^ crc_table[6][(w >> 8) & 0xFF] ^ crc_table[5][(w >> 16) & 0xFF] ^
            crc_table[4][(w >> 24) & 0xFF] ^ crc_table[3][(w >> 32) & 0xFF] ^
            crc_table[2][(w >> 40) & 0xFF] ^ crc_table[1][(w >> 48) & 0xFF] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t
crc_sse42(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    while (n && ((uintptr_t)p & 7)) {
        c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
        n--;
    }
    /* Three streams over three blocks of `len` bytes, joined (see crc_shift). */
#define CRC_THREE(len, table)                                                                 \
    while (n >= 3 * (size_t)(len)) {                                                          \
        uint64_t c1 = 0, c2 = 0;                                                              \
        for (const uint8_t *e = p + (len); p < e; p += 8) {                                   \
            uint64_t w0, w1, w2;                                                              \
            memcpy(&w0, p, 8);                                                                \
            memcpy(&w1, p + (len), 8);                                                        \
            memcpy(&w2, p + 2 * (len), 8);                                                    \
            c64 = __builtin_ia32_crc32di(c64, w0);                                            \
            c1 = __builtin_ia32_crc32di(c1, w1);                                              \
            c2 = __builtin_ia32_crc32di(c2, w2);                                              \
        }                                                                                     \
        c64 = crc_shift(table, (uint32_t)c64) ^ (uint32_t)c1;                                 \
        c64 = crc_shift(table, (uint32_t)c64) ^ (uint32_t)c2;                                 \
        p += 2 * (len);                                                                       \
        n -= 3 * (size_t)(len);                                                               \
    }
    CRC_THREE(CRC_LONG, crc_long)
    CRC_THREE(CRC_SHORT, crc_short)
#undef CRC_THREE
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
        p += 8;
        n -= 8;
    }
    while (n--)
        c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
    return (uint32_t)c64;
}
#endif

static uint32_t
crc32c_update(uint32_t c, const uint8_t *p, size_t n)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return crc_hw ? crc_sse42(c, p, n) : crc_sw(c, p, n);
#else
    return crc_sw(c, p, n);
#endif
}

static PyObject *
crc32c(PyObject *module, PyObject *args)
{
    Py_buffer view;
    unsigned long value = 0;
    if (!PyArg_ParseTuple(args, "y*|k:crc32c", &view, &value))
        return NULL;
    uint32_t c = ~(uint32_t)value;
    const uint8_t *p = (const uint8_t *)view.buf;
    size_t n = (size_t)view.len;
    if (n >= NOGIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        c = crc_hw ? crc_sse42(c, p, n) : crc_sw(c, p, n);
#else
        c = crc_sw(c, p, n);
#endif
        Py_END_ALLOW_THREADS
    }
    else {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        c = crc_hw ? crc_sse42(c, p, n) : crc_sw(c, p, n);
#else
        c = crc_sw(c, p, n);
#endif
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(~c);
}

static PyObject *
crc32c_software(PyObject *module, PyObject *args)
{
    Py_buffer view;
    unsigned long value = 0;
    if (!PyArg_ParseTuple(args, "y*|k:crc32c_software", &view, &value))
        return NULL;
    uint32_t c = crc_sw(~(uint32_t)value, (const uint8_t *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(~c);
}

static PyObject *
crc32c_hardware(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(crc_hw);
}

/* ------------------------------------------------------------------ walk_batches */

/* walk_batches(data, validate_crc, check_records, min_offset=None, borrow=False)
 *     -> (buf, [pos, kept, pos, kept, ...], stop)
 *
 * The consumer's I/O-thread work on a partition's fetched bytes in one call:
 * `buf` is `data` as bytes (copied unless it is bytes already) -- or, with
 * `borrow` and a memoryview, the memoryview itself, not copied: the caller
 * promises nothing writes to its bytes any more; then every
 * RecordBatch v2 from the start is framed, its header checked (length, magic,
 * record count, codec), its CRC-32C checked (`validate_crc`) and --
 * `check_records`, for an uncompressed batch -- its records scanned with
 * scan_records' checks (`kept`: how many are at or after `min_offset`; -1 when not
 * scanned). The walk stops, with no error, at the first thing it does not take as
 * good: a legacy or unknown magic, a bad length, a partial trailing batch, a CRC
 * or record mismatch, fewer than 61 bytes left. `stop` is where it stopped: the
 * caller (kpax.proto.records.decode_batches) goes on from there in Python, which
 * frames the rest and raises the very errors it always raised. The batches listed
 * are exactly those the Python walk would have yielded first, and a scanned batch
 * is one scan_records accepts with the same count.
 *
 * The walk keeps the GIL. Releasing it (tried for responses from 64 KiB, so that
 * the sync consumer's caller thread would build records meanwhile) made the sync
 * face slower: while the caller thread runs, a thread that gave the GIL up waits
 * up to the switch interval (5 ms) to get it back, so the I/O thread fell behind
 * and the caller found the buffer empty more often (bench.consumer_cpu: 0.80M vs
 * 0.90M records/s median of 5 interleaved rounds, the caller's CPU per record up
 * 15%). walk_plain touches no Python object, should that be tried again. */

/* Batches walked per pass (their positions kept on the stack between passes). */
#define WALK_CHUNK 256

static inline int64_t
get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t
get_be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static inline int16_t
get_be16(const uint8_t *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

/* 1 when s[0:n] is UTF-8 that bytes.decode("utf-8") accepts (no overlong forms,
 * no surrogates, nothing above U+10FFFF), else 0. */
static int
utf8_ok(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        }
        else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n)
                return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80)
                return 0;
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0))
                return 0; /* overlong; a surrogate */
            i += 3;
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n)
                return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80)
                return 0;
            if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90))
                return 0; /* overlong; above U+10FFFF */
            i += 4;
        }
        else {
            return 0;
        }
    }
    return 1;
}

/* scan_records' checks with no Python object: how many
 * records are at or after min_offset, or -1 where scan_records would raise. */
static Py_ssize_t
scan_plain(const uint8_t *p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
           int64_t min_offset)
{
    if (count > (end - pos) / 7 + 1)
        return -1;
    Py_ssize_t kept = 0;
    for (Py_ssize_t r = 0; r < count; r++) {
        int64_t len, tsd, offd, kl, vl, hc;
        if (read_varint(p, &pos, end, &len) < 0 || len < 6 || len > end - pos)
            return -1;
        Py_ssize_t rec_end = pos + (Py_ssize_t)len;
        pos += 1; /* attributes */
        if (read_varint(p, &pos, rec_end, &tsd) < 0 || read_varint(p, &pos, rec_end, &offd) < 0)
            return -1;
        int64_t off64;
        if (__builtin_add_overflow(base_offset, offd, &off64))
            off64 = offd < 0 ? INT64_MIN : INT64_MAX;
        if (read_varint(p, &pos, rec_end, &kl) < 0 || kl < -1 || kl > rec_end - pos)
            return -1;
        if (kl > 0)
            pos += (Py_ssize_t)kl;
        if (read_varint(p, &pos, rec_end, &vl) < 0 || vl < -1 || vl > rec_end - pos)
            return -1;
        if (vl > 0)
            pos += (Py_ssize_t)vl;
        if (pos < rec_end && p[pos] == 0) {
            pos += 1;
        }
        else {
            if (read_varint(p, &pos, rec_end, &hc) < 0 || hc < 0 || hc > rec_end - pos)
                return -1;
            for (int64_t h = 0; h < hc; h++) {
                int64_t hkl, hvl;
                if (read_varint(p, &pos, rec_end, &hkl) < 0 || hkl < 0 || hkl > rec_end - pos)
                    return -1;
                if (!utf8_ok(p + pos, (Py_ssize_t)hkl))
                    return -1;
                pos += (Py_ssize_t)hkl;
                if (read_varint(p, &pos, rec_end, &hvl) < 0 || hvl < -1 || hvl > rec_end - pos)
                    return -1;
                if (hvl > 0)
                    pos += (Py_ssize_t)hvl;
            }
        }
        if (pos != rec_end)
            return -1;
        if (off64 >= min_offset)
            kept++;
    }
    return pos == end ? kept : -1;
}

/* The walk itself (no Python object touched), from `pos`: fills ent with up to
 * `cap` (pos, kept) pairs, returns how many batches it took; *stop is where it
 * stopped (at `cap` batches: where the next one starts). */
static Py_ssize_t
walk_plain(const uint8_t *p, Py_ssize_t n, Py_ssize_t pos, int validate_crc, int check_records,
           int64_t min_offset, int64_t *ent, Py_ssize_t cap, Py_ssize_t *stop)
{
    Py_ssize_t nent = 0;
    while (nent < cap && n - pos >= 61) {
        int32_t length = get_be32(p + pos + 8);
        if (p[pos + 16] != 2 || length < 49)
            break;
        Py_ssize_t end = pos + 12 + (Py_ssize_t)length;
        if (end > n)
            break; /* a partial trailing batch */
        int codec = get_be16(p + pos + 21) & 7;
        int32_t count = get_be32(p + pos + 57);
        if (count < 0 || codec > 4)
            break;
        if (validate_crc) {
            uint32_t stored = (uint32_t)get_be32(p + pos + 17);
            uint32_t c = ~crc32c_update(0xFFFFFFFFu, p + pos + 21, (size_t)(end - pos - 21));
            if (c != stored)
                break;
        }
        int64_t kept = -1;
        if (check_records && codec == 0) {
            kept = scan_plain(p, pos + 61, end, count, get_be64(p + pos), min_offset);
            if (kept < 0)
                break;
        }
        ent[2 * nent] = pos;
        ent[2 * nent + 1] = kept;
        nent++;
        pos = end;
    }
    *stop = pos;
    return nent;
}

/* What a walk reads `data` (its buffer `view`) from, a new reference, with *p at
 * its bytes: bytes as they are; with `borrow`, a plain byte memoryview as it is
 * (the caller's promise: nothing writes to these bytes any more -- the
 * consumer's own response frame; the view keeps them alive and unmoved); else a
 * bytes copy. NULL on an error. */
static PyObject *
walk_source(PyObject *data, Py_buffer *view, int borrow, const uint8_t **p)
{
    if (PyBytes_CheckExact(data) ||
        (borrow && PyMemoryView_Check(data) && PyMemoryView_GET_BUFFER(data)->itemsize == 1 &&
         PyMemoryView_GET_BUFFER(data)->ndim == 1)) {
        Py_INCREF(data);
        *p = (const uint8_t *)view->buf;
        return data;
    }
    PyObject *copy = PyBytes_FromStringAndSize((const char *)view->buf, view->len);
    if (copy != NULL)
        *p = (const uint8_t *)PyBytes_AS_STRING(copy);
    return copy;
}

static PyObject *
walk_batches(PyObject *module, PyObject *args)
{
    Py_buffer view;
    int validate_crc, check_records, borrow = 0;
    PyObject *data, *min_off_obj = Py_None;
    if (!PyArg_ParseTuple(args, "Opp|Op:walk_batches", &data, &validate_crc, &check_records,
                          &min_off_obj, &borrow))
        return NULL;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *buf = NULL, *found = NULL;
    int64_t ent[2 * WALK_CHUNK];
    long long min_offset = LLONG_MIN;
    if (min_off_obj != Py_None) {
        min_offset = PyLong_AsLongLong(min_off_obj);
        if (min_offset == -1 && PyErr_Occurred())
            goto done;
    }
    Py_ssize_t n = view.len;
    const uint8_t *p;
    buf = walk_source(data, &view, borrow, &p);
    if (buf == NULL)
        goto done;
    found = PyList_New(0);
    if (found == NULL)
        goto done;
    Py_ssize_t stop = 0, nent;
    do {
        nent = walk_plain(p, n, stop, validate_crc, check_records, (int64_t)min_offset, ent,
                          WALK_CHUNK, &stop);
        for (Py_ssize_t i = 0; i < 2 * nent; i++) {
            PyObject *v = PyLong_FromLongLong(ent[i]);
            if (v == NULL || PyList_Append(found, v) < 0) {
                Py_XDECREF(v);
                goto done;
            }
            Py_DECREF(v);
        }
    } while (nent == WALK_CHUNK);
    result = Py_BuildValue("(OOn)", buf, found, stop);
done:
    Py_XDECREF(buf);
    Py_XDECREF(found);
    PyBuffer_Release(&view);
    return result;
}

/* walk_many(datas, min_offsets, validate_crc, check_records, borrow) -> [walk, ...]
 *
 * walk_batches over each of `datas` (with its min_offset), as a list of its
 * (buf, [pos, kept, ...], stop) results, in one call: a Fetch response's
 * partitions. When they hold NOGIL_MIN bytes or more, the walks run with the
 * GIL released, once for them all: the sync consumer's application thread
 * builds and reads records meanwhile (one release, not one per partition: a
 * thread taking the GIL back may wait for the switch interval). */
typedef struct {
    Py_buffer view;
    int held;
    PyObject *buf;
    const uint8_t *p;
    int64_t min_offset;
    int64_t *ent;
    Py_ssize_t nent, stop;
} walk_item;

static PyObject *
walk_many(PyObject *module, PyObject *args)
{
    PyObject *datas, *mins;
    int validate_crc, check_records, borrow;
    if (!PyArg_ParseTuple(args, "O!O!ppp:walk_many", &PyList_Type, &datas, &PyList_Type, &mins,
                          &validate_crc, &check_records, &borrow))
        return NULL;
    Py_ssize_t m = PyList_GET_SIZE(datas);
    if (PyList_GET_SIZE(mins) != m) {
        PyErr_SetString(PyExc_ValueError, "walk_many: datas and min_offsets differ in length");
        return NULL;
    }
    /* Tuples of the lists: reading an item may run Python code (an int's
     * __index__, a buffer's exporter) that could change a list under us. */
    PyObject *result = NULL, *dt = PyList_AsTuple(datas), *mt = PyList_AsTuple(mins);
    walk_item *items = PyMem_Calloc((size_t)(m ? m : 1), sizeof(walk_item));
    if (items == NULL || dt == NULL || mt == NULL) {
        Py_XDECREF(dt);
        Py_XDECREF(mt);
        PyMem_Free(items);
        return items == NULL ? PyErr_NoMemory() : NULL;
    }
    Py_ssize_t total = 0;
    int nomem = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        walk_item *it = &items[i];
        PyObject *data = PyTuple_GET_ITEM(dt, i), *mo = PyTuple_GET_ITEM(mt, i);
        it->min_offset = INT64_MIN;
        if (mo != Py_None) {
            long long v = PyLong_AsLongLong(mo);
            if (v == -1 && PyErr_Occurred())
                goto done;
            it->min_offset = (int64_t)v;
        }
        if (PyObject_GetBuffer(data, &it->view, PyBUF_SIMPLE) < 0)
            goto done;
        it->held = 1;
        it->buf = walk_source(data, &it->view, borrow, &it->p);
        if (it->buf == NULL)
            goto done;
        total += it->view.len;
    }
    PyThreadState *released = total >= NOGIL_MIN ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t i = 0; i < m && !nomem; i++) {
        walk_item *it = &items[i];
        Py_ssize_t n = it->view.len, cap = n / 61 + 1; /* a batch takes 61 bytes or more */
        it->ent = malloc((size_t)cap * 2 * sizeof(int64_t));
        if (it->ent == NULL)
            nomem = 1;
        else
            it->nent = walk_plain(it->p, n, 0, validate_crc, check_records, it->min_offset,
                                  it->ent, cap, &it->stop);
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    if (nomem) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyList_New(m);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < m; i++) {
        walk_item *it = &items[i];
        PyObject *found = PyList_New(2 * it->nent);
        if (found == NULL)
            goto fail;
        for (Py_ssize_t k = 0; k < 2 * it->nent; k++) {
            PyObject *v = PyLong_FromLongLong(it->ent[k]);
            if (v == NULL) {
                Py_DECREF(found);
                goto fail;
            }
            PyList_SET_ITEM(found, k, v);
        }
        PyObject *walk = Py_BuildValue("(ONn)", it->buf, found, it->stop);
        if (walk == NULL)
            goto fail;
        PyList_SET_ITEM(result, i, walk);
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    for (Py_ssize_t i = 0; i < m; i++) {
        if (items[i].held)
            PyBuffer_Release(&items[i].view);
        Py_XDECREF(items[i].buf);
        free(items[i].ent);
    }
    PyMem_Free(items);
    Py_DECREF(dt);
    Py_DECREF(mt);
    return result;
}

/* ------------------------------------------------------------------ frame_buffer */

/* frame_buffer(size) -> bytearray: `size` bytes, not initialised (no zero fill).
 * The broker connection's buffer for a large response frame, filled by the socket
 * (kpax.proto.framing): a large allocation is mapped pages the kernel commits only
 * as bytes are written into them, so its memory in use follows the bytes that
 * have arrived, and nothing is written twice. Bytes past those written must never
 * be read: the reader hands the frame out only once the socket filled all of it. */
static PyObject *
frame_buffer(PyObject *module, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "frame_buffer: negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

/* The rest of a large response frame, read from the socket with the GIL
 * released (kpax.broker.connection, where ResponseReader.frame_room says).
 * When a thread other than the event loop's runs Python code (the sync face's
 * application thread), the loop's thread waits for the GIL after every
 * readable event: up to the 5 ms switch interval each time, and a 6 MiB Fetch
 * response arrives in ~35 reads. Here the loop's thread reads on by itself:
 * while the bytes keep coming (none for idle_us ends it), for at most
 * budget_us, never past end, then hands the socket back to the loop. An end
 * of stream is left in the socket for the transport's next read; an error
 * (a reset) the kernel reports only once, so it is returned: (bytes read,
 * errno or 0). */
#ifndef _WIN32
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

static int64_t
monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static PyObject *
recv_rest(PyObject *module, PyObject *args)
{
    int fd;
    Py_buffer buf;
    Py_ssize_t pos, end;
    long budget_us, idle_us;
    if (!PyArg_ParseTuple(args, "iw*nnll", &fd, &buf, &pos, &end, &budget_us, &idle_us))
        return NULL;
    if (pos < 0 || end < pos || end > buf.len || budget_us < 0 || idle_us < 0) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "recv_rest: bad position, end or time");
        return NULL;
    }
    char *data = (char *)buf.buf;
    Py_ssize_t got = 0;
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t deadline = monotonic_us() + budget_us;
    while (pos < end) {
        ssize_t n = recv(fd, data + pos, (size_t)(end - pos), MSG_DONTWAIT);
        if (n > 0) {
            pos += n;
            got += n;
            continue;
        }
        if (n == 0)
            break; /* end of stream: the transport's next read sees it */
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            error = errno; /* consumed: the socket will not report it again */
            break;
        }
        int64_t left = deadline - monotonic_us();
        if (left <= 0)
            break;
        int64_t wait = left < idle_us ? left : idle_us;
        struct timespec ts = {(time_t)(wait / 1000000), (long)(wait % 1000000) * 1000};
        struct pollfd pfd = {fd, POLLIN, 0};
        if (ppoll(&pfd, 1, &ts, NULL) <= 0)
            break; /* nothing more for idle_us (or poll failed): back to the loop */
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return Py_BuildValue("(ni)", got, error);
}
#endif

/* A tuple the cyclic GC stops tracking (returned as it is). Only for tuples
 * whose items cannot lead back to them (bytes, memoryviews of a response buffer,
 * numbers, strings, untracked tuples): the consumer's per-batch build arguments,
 * which live until their records are read and were most of what the GC's
 * older generations walked. */
static PyObject *
untrack(PyObject *module, PyObject *arg)
{
    if (!PyTuple_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "untrack: a tuple is expected");
        return NULL;
    }
    if (PyObject_GC_IsTracked(arg))
        PyObject_GC_UnTrack(arg);
    Py_INCREF(arg);
    return arg;
}

/* ------------------------------------------------------------------ module */

/* ------------------------------------------------------------------ Produce */

/* The producer's Produce request and response (kpax.proto.produce_wire): the
 * well-formed common case in C, byte for byte what the Python reference gives.
 * Anything else -- a type, length or value the reference would reject or that
 * is rare (record errors in a response) -- returns NotImplemented, and the
 * caller runs the reference, which gives the answer or the error. */

#define PRODUCE_FLEXIBLE 9
#define PRODUCE_TOPIC_IDS 13

static inline Py_ssize_t
uvarint_size(uint64_t v)
{
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline char *
write_uvarint(char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

/* A topic's 16-byte id: from a uuid.UUID (its .bytes) or a 16-byte bytes.
   New reference, or NULL without an exception when it is neither. */
static PyObject *
topic_id_bytes(PyObject *topic)
{
    static PyObject *s_bytes = NULL;
    if (PyUnicode_Check(topic) || PyBytes_Check(topic))
        return NULL; /* the reference rejects names (and raw bytes) for v13 */
    if (s_bytes == NULL && (s_bytes = PyUnicode_InternFromString("bytes")) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *raw = PyObject_GetAttr(topic, s_bytes);
    if (raw == NULL || !PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 16) {
        PyErr_Clear();
        Py_XDECREF(raw);
        return NULL;
    }
    return raw;
}

static PyObject *
encode_produce(PyObject *module, PyObject *args)
{
    int version, acks;
    long long correlation_id, timeout_ms;
    PyObject *client_id, *txn_id, *topics;
    if (!PyArg_ParseTuple(args, "iLOOiLO:encode_produce", &version, &correlation_id, &client_id,
                          &txn_id, &acks, &timeout_ms, &topics))
        return NULL;
    if (version < 3 || version > 13 || correlation_id < INT32_MIN || correlation_id > INT32_MAX ||
        acks < INT16_MIN || acks > INT16_MAX || timeout_ms < INT32_MIN || timeout_ms > INT32_MAX ||
        !PyList_CheckExact(topics))
        Py_RETURN_NOTIMPLEMENTED;
    int flexible = version >= PRODUCE_FLEXIBLE, by_id = version >= PRODUCE_TOPIC_IDS;
    Py_ssize_t cid_len = -1, txn_len = -1;
    const char *cid = NULL, *txn = NULL;
    if (client_id != Py_None) {
        if (!PyUnicode_CheckExact(client_id) ||
            (cid = PyUnicode_AsUTF8AndSize(client_id, &cid_len)) == NULL)
            goto fallback;
        if (cid_len > 0x7FFF)
            goto fallback;
    }
    if (txn_id != Py_None) {
        if (!PyUnicode_CheckExact(txn_id) || (txn = PyUnicode_AsUTF8AndSize(txn_id, &txn_len)) == NULL)
            goto fallback;
        if (!flexible && txn_len > 0x7FFF)
            goto fallback;
    }
    Py_ssize_t nt = PyList_GET_SIZE(topics);
    /* pass 1: check the shapes and measure */
    Py_ssize_t size = 4 + 2 + 2 + 4 + 2 + (cid_len > 0 ? cid_len : 0);
    if (flexible)
        size += 1 + (txn_id == Py_None ? 1 : uvarint_size((uint64_t)txn_len + 1) + txn_len) +
                uvarint_size((uint64_t)nt + 1);
    else
        size += 2 + (txn_len > 0 ? txn_len : 0) + 4;
    size += 6; /* acks, timeout */
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *entry = PyList_GET_ITEM(topics, i);
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2)
            goto fallback;
        PyObject *topic = PyTuple_GET_ITEM(entry, 0), *parts = PyTuple_GET_ITEM(entry, 1);
        if (!PyList_CheckExact(parts))
            goto fallback;
        if (by_id) {
            PyObject *raw = topic_id_bytes(topic);
            if (raw == NULL)
                goto fallback;
            Py_DECREF(raw);
            size += 16;
        }
        else {
            Py_ssize_t tlen;
            if (!PyUnicode_CheckExact(topic) || PyUnicode_AsUTF8AndSize(topic, &tlen) == NULL) {
                PyErr_Clear();
                goto fallback;
            }
            size += flexible ? uvarint_size((uint64_t)tlen + 1) + tlen : 2 + tlen;
            if (!flexible && tlen > 0x7FFF)
                goto fallback;
        }
        Py_ssize_t np = PyList_GET_SIZE(parts);
        size += flexible ? uvarint_size((uint64_t)np + 1) + 1 : 4;
        for (Py_ssize_t j = 0; j < np; j++) {
            PyObject *pe = PyList_GET_ITEM(parts, j);
            if (!PyTuple_CheckExact(pe) || PyTuple_GET_SIZE(pe) != 2 ||
                !PyLong_CheckExact(PyTuple_GET_ITEM(pe, 0)))
                goto fallback;
            PyObject *rec = PyTuple_GET_ITEM(pe, 1);
            int overflow = 0;
            long long index = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(pe, 0), &overflow);
            if (overflow || index < INT32_MIN || index > INT32_MAX)
                goto fallback;
            size += 4;
            if (rec == Py_None)
                size += flexible ? 2 : 4;
            else if (PyBytes_CheckExact(rec)) {
                Py_ssize_t rl = PyBytes_GET_SIZE(rec);
                if (rl > INT32_MAX - 1)
                    goto fallback;
                size += flexible ? uvarint_size((uint64_t)rl + 1) + rl + 1 : 4 + rl;
            }
            else
                goto fallback;
        }
    }
    if (flexible)
        size += 1; /* request tagged fields */
    if (size - 4 > INT32_MAX)
        goto fallback;
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        return NULL;
    /* pass 2: write (no Python code runs between the passes: the objects are
       exact bytes, str and lists of tuples, which cannot change meanwhile) */
    char *p = PyBytes_AS_STRING(out);
    put_be32(p, (int32_t)(size - 4));
    put_be16(p + 4, 0);
    put_be16(p + 6, (int16_t)version);
    put_be32(p + 8, (int32_t)correlation_id);
    p += 12;
    put_be16(p, (int16_t)cid_len);
    p += 2;
    if (cid_len > 0) {
        memcpy(p, cid, (size_t)cid_len);
        p += cid_len;
    }
    if (flexible) {
        *p++ = 0; /* header tagged fields */
        if (txn_id == Py_None)
            *p++ = 0;
        else {
            p = write_uvarint(p, (uint64_t)txn_len + 1);
            memcpy(p, txn, (size_t)txn_len);
            p += txn_len;
        }
    }
    else {
        put_be16(p, (int16_t)txn_len);
        p += 2;
        if (txn_len > 0) {
            memcpy(p, txn, (size_t)txn_len);
            p += txn_len;
        }
    }
    put_be16(p, (int16_t)acks);
    put_be32(p + 2, (int32_t)timeout_ms);
    p += 6;
    if (flexible)
        p = write_uvarint(p, (uint64_t)nt + 1);
    else {
        put_be32(p, (int32_t)nt);
        p += 4;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *entry = PyList_GET_ITEM(topics, i);
        PyObject *topic = PyTuple_GET_ITEM(entry, 0), *parts = PyTuple_GET_ITEM(entry, 1);
        if (by_id) {
            PyObject *raw = topic_id_bytes(topic);
            if (raw == NULL) {
                Py_DECREF(out);
                goto fallback;
            }
            memcpy(p, PyBytes_AS_STRING(raw), 16);
            Py_DECREF(raw);
            p += 16;
        }
        else {
            Py_ssize_t tlen;
            const char *t = PyUnicode_AsUTF8AndSize(topic, &tlen);
            if (flexible)
                p = write_uvarint(p, (uint64_t)tlen + 1);
            else {
                put_be16(p, (int16_t)tlen);
                p += 2;
            }
            memcpy(p, t, (size_t)tlen);
            p += tlen;
        }
        Py_ssize_t np = PyList_GET_SIZE(parts);
        if (flexible)
            p = write_uvarint(p, (uint64_t)np + 1);
        else {
            put_be32(p, (int32_t)np);
            p += 4;
        }
        for (Py_ssize_t j = 0; j < np; j++) {
            PyObject *pe = PyList_GET_ITEM(parts, j);
            PyObject *rec = PyTuple_GET_ITEM(pe, 1);
            put_be32(p, (int32_t)PyLong_AsLongLong(PyTuple_GET_ITEM(pe, 0)));
            p += 4;
            if (rec == Py_None) {
                if (flexible)
                    *p++ = 0;
                else {
                    put_be32(p, -1);
                    p += 4;
                }
            }
            else {
                Py_ssize_t rl = PyBytes_GET_SIZE(rec);
                if (flexible)
                    p = write_uvarint(p, (uint64_t)rl + 1);
                else {
                    put_be32(p, (int32_t)rl);
                    p += 4;
                }
                memcpy(p, PyBytes_AS_STRING(rec), (size_t)rl);
                p += rl;
            }
            if (flexible)
                *p++ = 0; /* partition tagged fields */
        }
        if (flexible)
            *p++ = 0; /* topic tagged fields */
    }
    if (flexible)
        *p++ = 0; /* request tagged fields */
    if (p != PyBytes_AS_STRING(out) + size) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_SystemError, "encode_produce: size mismatch");
        return NULL;
    }
    return out;
fallback:
    PyErr_Clear();
    Py_RETURN_NOTIMPLEMENTED;
}

/* A bounded cursor over a response frame; every read fails (0) past the end. */
typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos, len;
} Cursor;

static inline int
cur_uvarint(Cursor *c, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (c->pos >= c->len)
            return 0;
        uint8_t b = c->buf[c->pos++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

static inline int
cur_skip_tags(Cursor *c)
{
    uint64_t n, tag, sz;
    if (!cur_uvarint(c, &n))
        return 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!cur_uvarint(c, &tag) || !cur_uvarint(c, &sz) || sz > (uint64_t)(c->len - c->pos))
            return 0;
        c->pos += (Py_ssize_t)sz;
    }
    return 1;
}

static inline int
cur_int(Cursor *c, int width, int64_t *out)
{
    if (c->len - c->pos < width)
        return 0;
    const uint8_t *p = c->buf + c->pos;
    uint64_t v = 0;
    for (int i = 0; i < width; i++)
        v = (v << 8) | p[i];
    if (width == 2)
        *out = (int16_t)v;
    else if (width == 4)
        *out = (int32_t)v;
    else
        *out = (int64_t)v;
    c->pos += width;
    return 1;
}

/* An array's length (null -> 0); 0 on a bad or oversized count. */
static inline int
cur_count(Cursor *c, int flexible, Py_ssize_t *out)
{
    int64_t n;
    if (flexible) {
        uint64_t u;
        if (!cur_uvarint(c, &u))
            return 0;
        n = (int64_t)u - 1;
    }
    else if (!cur_int(c, 4, &n))
        return 0;
    if (n < 0)
        n = 0;
    if (n > c->len - c->pos)
        return 0;
    *out = (Py_ssize_t)n;
    return 1;
}

/* A nullable string: new reference (Py_None for null), or NULL (a bad one; an
   exception may be set). */
static PyObject *
cur_string(Cursor *c, int flexible)
{
    int64_t n;
    if (flexible) {
        uint64_t u;
        if (!cur_uvarint(c, &u))
            return NULL;
        n = (int64_t)u - 1;
    }
    else if (!cur_int(c, 2, &n))
        return NULL;
    if (n < 0)
        Py_RETURN_NONE;
    if (n > c->len - c->pos)
        return NULL;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)c->buf + c->pos, (Py_ssize_t)n, NULL);
    c->pos += (Py_ssize_t)n;
    return s;
}

static PyObject *
decode_produce_response(PyObject *module, PyObject *args)
{
    Py_buffer view;
    int version;
    if (!PyArg_ParseTuple(args, "y*i:decode_produce_response", &view, &version))
        return NULL;
    PyObject *out = NULL, *rows = NULL, *topic = NULL;
    if (version < 3 || version > 13)
        goto fallback;
    int flexible = version >= PRODUCE_FLEXIBLE, by_id = version >= PRODUCE_TOPIC_IDS;
    Cursor c = {(const uint8_t *)view.buf, 4, view.len};
    if (c.len < 4 || (flexible && !cur_skip_tags(&c)))
        goto fallback;
    Py_ssize_t nt;
    if (!cur_count(&c, flexible, &nt))
        goto fallback;
    rows = PyList_New(0);
    if (rows == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < nt; i++) {
        if (by_id) {
            if (c.len - c.pos < 16)
                goto fallback;
            topic = PyBytes_FromStringAndSize((const char *)c.buf + c.pos, 16);
            c.pos += 16;
        }
        else {
            topic = cur_string(&c, flexible);
            if (topic == Py_None) {
                Py_DECREF(topic);
                topic = PyUnicode_FromStringAndSize("", 0);
            }
        }
        if (topic == NULL)
            goto fallback;
        Py_ssize_t np;
        if (!cur_count(&c, flexible, &np))
            goto fallback;
        for (Py_ssize_t j = 0; j < np; j++) {
            int64_t index, code, base, append, skip;
            if (!cur_int(&c, 4, &index) || !cur_int(&c, 2, &code) || !cur_int(&c, 8, &base) ||
                !cur_int(&c, 8, &append) || (version >= 5 && !cur_int(&c, 8, &skip)))
                goto fallback;
            PyObject *message = Py_None;
            Py_INCREF(message);
            if (version >= 8) {
                Py_ssize_t nerr;
                if (!cur_count(&c, flexible, &nerr) || nerr > 0) {
                    Py_DECREF(message);
                    goto fallback; /* record errors: the reference folds them in */
                }
                Py_DECREF(message);
                message = cur_string(&c, flexible);
                if (message == NULL)
                    goto fallback;
            }
            if (flexible && !cur_skip_tags(&c)) {
                Py_DECREF(message);
                goto fallback;
            }
            PyObject *row = Py_BuildValue("(OLLLLN)", topic, (long long)index, (long long)code,
                                          (long long)base, (long long)append, message);
            if (row == NULL)
                goto error;
            int rc = PyList_Append(rows, row);
            Py_DECREF(row);
            if (rc < 0)
                goto error;
        }
        Py_CLEAR(topic);
        if (flexible && !cur_skip_tags(&c))
            goto fallback;
    }
    int64_t throttle;
    if (!cur_int(&c, 4, &throttle) || (flexible && !cur_skip_tags(&c)) || c.pos != c.len)
        goto fallback;
    out = Py_BuildValue("(LN)", (long long)throttle, rows);
    rows = NULL;
    goto done;
fallback:
    PyErr_Clear();
    Py_INCREF(Py_NotImplemented);
    out = Py_NotImplemented;
    goto done;
error:
    out = NULL;
done:
    Py_XDECREF(topic);
    Py_XDECREF(rows);
    PyBuffer_Release(&view);
    return out;
}

/* ------------------------------------------------------------------ LZ4 frames */

/* LZ4 block compression (the block format of the LZ4 specification): a
 * sequence is a token (literal length << 4 | match length - 4, 15 meaning
 * more length bytes of 255 each follow), the literals, a 2-byte little-endian
 * offset back and the match length's extra bytes; the last sequence is
 * literals only. A match starts at least LZ4_MFLIMIT bytes before the end and
 * stops LZ4_LASTLITERALS before it. Greedy single-probe search on a hash of 4
 * bytes, skipping faster and faster through data that does not match (so
 * incompressible data costs little); each block is independent. */
#define LZ4_MINMATCH 4
#define LZ4_MFLIMIT 12
#define LZ4_LASTLITERALS 5
#define LZ4_HASH_LOG 12
#define LZ4_BLOCK_MAX 65536
#define LZ4_SKIP_TRIGGER 6

static inline uint32_t
read_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v; /* only compared for equality and hashed: byte order does not matter */
}

static inline uint8_t *
lz4_put_length(uint8_t *op, Py_ssize_t len)
{
    for (; len >= 255; len -= 255)
        *op++ = 255;
    *op++ = (uint8_t)len;
    return op;
}

/* Compress src[0:n] (n <= LZ4_BLOCK_MAX) into dst, at most cap bytes; returns
 * the compressed size, or -1 when it would not be smaller than cap (the
 * caller then stores the block uncompressed). */
static Py_ssize_t
lz4_compress_block(const uint8_t *src, Py_ssize_t n, uint8_t *dst, Py_ssize_t cap)
{
    uint16_t table[1 << LZ4_HASH_LOG];
    uint8_t *op = dst;
    const uint8_t *dend = dst + cap;
    Py_ssize_t anchor = 0, ip = 0;
    if (n >= LZ4_MFLIMIT + 1) {
        memset(table, 0, sizeof(table));
        const Py_ssize_t last_start = n - LZ4_MFLIMIT; /* a match starts before this */
        const Py_ssize_t match_end = n - LZ4_LASTLITERALS;
        unsigned misses = 1u << LZ4_SKIP_TRIGGER;
        ip = 1;
        table[(read_le32(src) * 2654435761u) >> (32 - LZ4_HASH_LOG)] = 0;
        while (ip < last_start) {
            uint32_t seq = read_le32(src + ip);
            uint32_t h = (seq * 2654435761u) >> (32 - LZ4_HASH_LOG);
            Py_ssize_t cand = table[h];
            table[h] = (uint16_t)ip;
            if (cand >= ip || ip - cand > 65535 || read_le32(src + cand) != seq) {
                ip += misses++ >> LZ4_SKIP_TRIGGER;
                continue;
            }
            misses = 1u << LZ4_SKIP_TRIGGER;
            while (ip > anchor && cand > 0 && src[ip - 1] == src[cand - 1]) {
                ip--;
                cand--;
            }
            Py_ssize_t mlen = LZ4_MINMATCH;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* 8 bytes at a time: the lowest differing byte ends the match */
            while (ip + mlen + 8 <= match_end) {
                uint64_t a, b;
                memcpy(&a, src + ip + mlen, 8);
                memcpy(&b, src + cand + mlen, 8);
                if (a != b) {
                    mlen += __builtin_ctzll(a ^ b) >> 3;
                    goto extended;
                }
                mlen += 8;
            }
#endif
            while (ip + mlen < match_end && src[ip + mlen] == src[cand + mlen])
                mlen++;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        extended:
#endif
            Py_ssize_t lit = ip - anchor;
            /* token, literal length bytes, literals, offset, match length bytes */
            if (dend - op < 1 + lit / 255 + 1 + lit + 2 + (mlen - LZ4_MINMATCH) / 255 + 1)
                return -1;
            uint8_t *token = op++;
            uint8_t t = (uint8_t)((lit >= 15 ? 15 : lit) << 4);
            if (lit >= 15)
                op = lz4_put_length(op, lit - 15);
            memcpy(op, src + anchor, (size_t)lit);
            op += lit;
            Py_ssize_t off = ip - cand;
            *op++ = (uint8_t)off;
            *op++ = (uint8_t)(off >> 8);
            Py_ssize_t ml = mlen - LZ4_MINMATCH;
            t |= (uint8_t)(ml >= 15 ? 15 : ml);
            if (ml >= 15)
                op = lz4_put_length(op, ml - 15);
            *token = t;
            ip += mlen;
            anchor = ip;
            if (ip - 2 > 0 && ip < last_start) /* a position inside the match, for the next one */
                table[(read_le32(src + ip - 2) * 2654435761u) >> (32 - LZ4_HASH_LOG)] =
                    (uint16_t)(ip - 2);
        }
    }
    Py_ssize_t lit = n - anchor;
    if (dend - op < 1 + lit / 255 + 1 + lit)
        return -1;
    *op++ = (uint8_t)((lit >= 15 ? 15 : lit) << 4);
    if (lit >= 15)
        op = lz4_put_length(op, lit - 15);
    memcpy(op, src + anchor, (size_t)lit);
    op += lit;
    Py_ssize_t size = op - dst;
    return size < cap ? size : -1;
}

static inline void
put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* The blocks and end mark of an LZ4 frame of src[0:n] at op (room for
 * 4 * blocks + n + 4 bytes), the GIL released from NOGIL_MIN bytes; returns the
 * end. */
static uint8_t *
lz4_blocks(uint8_t *op, const uint8_t *src, Py_ssize_t n)
{
    PyThreadState *saved = n >= NOGIL_MIN ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t start = 0; start < n; start += LZ4_BLOCK_MAX) {
        Py_ssize_t len = n - start < LZ4_BLOCK_MAX ? n - start : LZ4_BLOCK_MAX;
        Py_ssize_t size = lz4_compress_block(src + start, len, op + 4, len);
        if (size < 0) {
            put_le32(op, (uint32_t)len | 0x80000000u);
            memcpy(op + 4, src + start, (size_t)len);
            size = len;
        }
        else {
            put_le32(op, (uint32_t)size);
        }
        op += 4 + size;
    }
    put_le32(op, 0);
    op += 4;
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    return op;
}

/* A whole lz4-compressed RecordBatch v2 from columns in one call: the records
 * section (encode_records), then the batch header, the LZ4 frame of that
 * section (frame_header, then lz4_blocks) and the CRC in one buffer; the same
 * bytes as encode_records + lz4_frame + assemble_batch. attributes must say lz4. */
static PyObject *
encode_batch_lz4(PyObject *module, PyObject *args)
{
    PyObject *ts_in, *keys_in, *values_in, *headers_in;
    long long base_ts, base_offset, producer_id;
    int attributes, producer_epoch, base_sequence, leader_epoch;
    Py_buffer header;
    if (!PyArg_ParseTuple(args, "OOOOLLiLiiiy*:encode_batch_lz4", &ts_in, &keys_in, &values_in,
                          &headers_in, &base_ts, &base_offset, &attributes, &producer_id,
                          &producer_epoch, &base_sequence, &leader_epoch, &header))
        return NULL;
    PyObject *out = NULL;
    if ((attributes & 7) != 3) {
        PyErr_SetString(PyExc_ValueError, "encode_batch_lz4: attributes do not say lz4 (3)");
        goto done;
    }
    Py_ssize_t n = PyObject_Length(values_in);
    if (n < 0)
        goto done;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "encode_batch_lz4: no records");
        goto done;
    }
    int64_t max_ts = INT64_MIN;
    PyObject *records = encode_records_impl(ts_in, keys_in, values_in, headers_in, base_ts, 0,
                                            &max_ts);
    if (records == NULL)
        goto done;
    Py_ssize_t size = PyBytes_GET_SIZE(records);
    Py_ssize_t blocks = (size + LZ4_BLOCK_MAX - 1) / LZ4_BLOCK_MAX;
    out = PyBytes_FromStringAndSize(NULL, BATCH_HEADER + header.len + 4 * blocks + size + 4);
    if (out == NULL) {
        Py_DECREF(records);
        goto done;
    }
    uint8_t *start = (uint8_t *)PyBytes_AS_STRING(out);
    memcpy(start + BATCH_HEADER, header.buf, (size_t)header.len);
    uint8_t *end = lz4_blocks(start + BATCH_HEADER + header.len,
                              (const uint8_t *)PyBytes_AS_STRING(records), size);
    Py_DECREF(records);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(end - start)) < 0) {
        out = NULL;
        goto done;
    }
    out = finish_batch(out, n, base_ts, max_ts, base_offset, attributes, producer_id,
                       producer_epoch, base_sequence, leader_epoch);
done:
    PyBuffer_Release(&header);
    return out;
}

/* The bytes that extend an LZ4 length whose nibble is 15, added to *len (each
 * 255 means another follows); 0, or -1 if they run past iend. */
static inline int
lz4_more_length(const uint8_t **ip, const uint8_t *iend, size_t *len)
{
    unsigned b;
    do {
        if (*ip >= iend)
            return -1;
        b = *(*ip)++;
        *len += b;
    } while (b == 255);
    return 0;
}

/* An LZ4 frame's block size word (little-endian u32) at p. */
static inline uint32_t
lz4_block_word(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* One LZ4 block (the block format: sequences of literals and matches) decoded
 * into dst[0:cap]. Returns the bytes written; -1 if the block is malformed (a
 * length past its end, an offset of 0 or before the output's start); -2 if it
 * decodes to more than cap. Every read is bounded by n, every write by cap. */
static Py_ssize_t
lz4_block_decode(const uint8_t *src, Py_ssize_t n, uint8_t *dst, Py_ssize_t cap)
{
    const uint8_t *ip = src, *iend = src + n;
    uint8_t *op = dst, *oend = dst + cap;
    if (n == 0)
        return -1;
    for (;;) {
        if (ip >= iend)
            return -1;
        unsigned token = *ip++;
        size_t lit = token >> 4;
        if (lit == 15 && lz4_more_length(&ip, iend, &lit) < 0)
            return -1;
        if ((size_t)(iend - ip) < lit)
            return -1;
        if ((size_t)(oend - op) < lit)
            return -2;
        memcpy(op, ip, lit);
        ip += lit;
        op += lit;
        if (ip == iend)
            break; /* the last sequence: literals only */
        if (iend - ip < 2)
            return -1;
        size_t off = (size_t)ip[0] | ((size_t)ip[1] << 8);
        ip += 2;
        if (off == 0 || off > (size_t)(op - dst))
            return -1;
        size_t ml = token & 15;
        if (ml == 15 && lz4_more_length(&ip, iend, &ml) < 0)
            return -1;
        ml += 4;
        if ((size_t)(oend - op) < ml)
            return -2;
        const uint8_t *m = op - off;
        if (off >= ml) {
            memcpy(op, m, ml);
        }
        else { /* overlapping: a repeating pattern, byte by byte */
            for (size_t i = 0; i < ml; i++)
                op[i] = m[i];
        }
        op += ml;
    }
    return (Py_ssize_t)(op - dst);
}

/* lz4_decode_blocks(data, pos, max_block, block_checksum, max_size) -> bytes | None:
 * the independent blocks of an LZ4 frame, from the first block's size at pos to
 * the end mark, decoded in one call (kpax.proto.compression checks the frame's
 * header before). None when they decode to more than max_size; CorruptRecordError
 * for anything malformed. Block checksums (block_checksum: 4 or 0 bytes after
 * each block) are skipped, as the pure-Python loop does. Small frames keep the
 * GIL (a consumer's I/O thread decompresses a 16 KiB batch in microseconds;
 * taking the GIL back after each, while the application's thread holds it,
 * could cost a switch interval, 5 ms); large ones release it. */
static PyObject *
lz4_decode_blocks(PyObject *module, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t pos, max_block, block_checksum, max_size;
    if (!PyArg_ParseTuple(args, "y*nnnn:lz4_decode_blocks", &data, &pos, &max_block, &block_checksum,
                          &max_size))
        return NULL;
    PyObject *out = NULL;
    const uint8_t *p = (const uint8_t *)data.buf;
    Py_ssize_t end = data.len;
    if (pos < 0 || pos > end || max_block <= 0 || block_checksum < 0 || max_size < 0) {
        PyErr_SetString(PyExc_ValueError, "lz4_decode_blocks: bad arguments");
        goto done;
    }
    if (max_size > PY_SSIZE_T_MAX / 4)
        max_size = PY_SSIZE_T_MAX / 4; /* as good as no cap; bound below cannot overflow */
    /* Pass 1: the block sizes, and a bound of the output (raw blocks exactly,
     * compressed ones max_block each), capped at max_size. */
    Py_ssize_t bound = 0, at = pos;
    for (;;) {
        if (at > end - 4) {
            corrupt("lz4 frame truncated at byte %zd (no end mark)", at);
            goto done;
        }
        uint32_t word = lz4_block_word(p + at);
        at += 4;
        if (word == 0)
            break;
        Py_ssize_t size = (Py_ssize_t)(word & 0x7FFFFFFF);
        if (size > max_block || size > end - at) {
            corrupt("lz4 block at byte %zd has a bad size %zd (max %zd, %zd bytes remain)",
                    at - 4, size, max_block, end - at);
            goto done;
        }
        bound += (word & 0x80000000) ? size : max_block;
        if (bound > max_size)
            bound = max_size + 1; /* one byte more than allowed: past it, too big */
        at += size;
        if (block_checksum > end - at) {
            corrupt("lz4 frame truncated at byte %zd (no end mark)", at);
            goto done;
        }
        at += block_checksum;
    }
    out = PyBytes_FromStringAndSize(NULL, bound);
    if (out == NULL)
        goto done;
    /* Pass 2: decode. */
    uint8_t *dst = (uint8_t *)PyBytes_AS_STRING(out);
    Py_ssize_t written = 0, bad_at = -1, rc = 0;
    int too_big = 0;
    PyThreadState *saved = end - pos >= NOGIL_MIN ? PyEval_SaveThread() : NULL;
    at = pos;
    for (;;) {
        /* (checked again: a bytearray could change size under a thread without the GIL) */
        if (at > end - 4) {
            bad_at = at;
            break;
        }
        uint32_t word = lz4_block_word(p + at);
        at += 4;
        if (word == 0)
            break;
        Py_ssize_t size = (Py_ssize_t)(word & 0x7FFFFFFF);
        if (size > max_block || size > end - at || block_checksum > end - at - size) {
            bad_at = at - 4;
            break;
        }
        Py_ssize_t room = bound - written;
        if (word & 0x80000000) {
            if (size > room) {
                too_big = 1;
                break;
            }
            memcpy(dst + written, p + at, (size_t)size);
            written += size;
        }
        else {
            rc = lz4_block_decode(p + at, size, dst + written, room < max_block ? room : max_block);
            if (rc == -2 && room < max_block) { /* (only when bound was capped) */
                too_big = 1;
                break;
            }
            if (rc < 0) {
                bad_at = at - 4;
                break;
            }
            written += rc;
        }
        at += size + block_checksum;
    }
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    if (bad_at >= 0) {
        corrupt("lz4 block at byte %zd is corrupt (%s)", bad_at,
                rc == -2 ? "it decodes to more than the frame's block size"
                         : "malformed sequence or size");
        Py_CLEAR(out);
        goto done;
    }
    if (too_big || written > max_size) {
        Py_CLEAR(out);
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    if (_PyBytes_Resize(&out, written) < 0)
        out = NULL;
done:
    PyBuffer_Release(&data);
    return out;
}

/* lz4_frame(data, header) -> bytes: header, then data in 64 KiB blocks, each a
 * little-endian u32 size (high bit set: stored uncompressed, when compressing
 * did not make it smaller) and its bytes, then the end mark (a zero u32). */
static PyObject *
lz4_frame(PyObject *module, PyObject *args)
{
    Py_buffer data, header;
    if (!PyArg_ParseTuple(args, "y*y*:lz4_frame", &data, &header))
        return NULL;
    const uint8_t *src = (const uint8_t *)data.buf;
    Py_ssize_t n = data.len;
    Py_ssize_t blocks = (n + LZ4_BLOCK_MAX - 1) / LZ4_BLOCK_MAX;
    PyObject *out = PyBytes_FromStringAndSize(NULL, header.len + 4 * blocks + n + 4);
    if (out == NULL) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&header);
        return NULL;
    }
    uint8_t *op = (uint8_t *)PyBytes_AS_STRING(out);
    memcpy(op, header.buf, (size_t)header.len);
    op = lz4_blocks(op + header.len, src, n);
    PyBuffer_Release(&data);
    PyBuffer_Release(&header);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(op - (uint8_t *)PyBytes_AS_STRING(out))) < 0)
        return NULL;
    return out;
}

static PyMethodDef methods[] = {
    {"encode_records", (PyCFunction)encode_records, METH_VARARGS,
     "encode_records(timestamps, keys, values, headers, base_timestamp) -> bytes"},
    {"encode_batch", (PyCFunction)encode_batch, METH_VARARGS,
     "encode_batch(timestamps, keys, values, headers, base_timestamp, base_offset, attributes, "
     "producer_id, producer_epoch, base_sequence, partition_leader_epoch) -> bytes: a whole "
     "uncompressed RecordBatch v2"},
    {"parse_records", (PyCFunction)(void (*)(void))parse_records, METH_VARARGS | METH_KEYWORDS,
     "parse_records(buf, pos, end, count, base_offset, base_timestamp, template=None, slots=None, "
     "timestamp=None, min_offset=None) -> list"},
    {"scan_records", (PyCFunction)scan_records, METH_VARARGS,
     "scan_records(buf, pos, end, count, base_offset, min_offset=None) -> int: parse_records' "
     "checks, no record built; the number of records at or after min_offset"},
    {"encode_produce", (PyCFunction)encode_produce, METH_VARARGS,
     "encode_produce(version, correlation_id, client_id, transactional_id, acks, timeout_ms, "
     "topics) -> bytes, or NotImplemented (see kpax.proto.produce_wire)"},
    {"decode_produce_response", (PyCFunction)decode_produce_response, METH_VARARGS,
     "decode_produce_response(frame, version) -> (throttle_ms, rows), or NotImplemented"},
    {"encode_batch_lz4", (PyCFunction)encode_batch_lz4, METH_VARARGS,
     "encode_batch_lz4(timestamps, keys, values, headers, base_timestamp, base_offset, "
     "attributes, producer_id, producer_epoch, base_sequence, partition_leader_epoch, "
     "frame_header) -> bytes: a whole lz4-compressed RecordBatch v2"},
    {"lz4_frame", (PyCFunction)lz4_frame, METH_VARARGS,
     "lz4_frame(data, header) -> bytes: an LZ4 frame of independent 64 KiB blocks after header "
     "(see kpax.proto.compression)"},
    {"lz4_decode_blocks", (PyCFunction)lz4_decode_blocks, METH_VARARGS,
     "lz4_decode_blocks(data, pos, max_block, block_checksum, max_size) -> bytes, or None when more "
     "than max_size: an LZ4 frame's independent blocks decoded (see kpax.proto.compression)"},
    {"crc32c", (PyCFunction)crc32c, METH_VARARGS,
     "crc32c(data, value=0) -> int: CRC-32C of a bytes-like object, continuing from value"},
    {"crc32c_software", (PyCFunction)crc32c_software, METH_VARARGS,
     "crc32c_software(data, value=0) -> int: crc32c by the table code (the fallback, for tests)"},
    {"walk_batches", (PyCFunction)walk_batches, METH_VARARGS,
     "walk_batches(data, validate_crc, check_records, min_offset=None, borrow=False) -> "
     "(buf, [pos, kept, ...], "
     "stop): the good RecordBatch v2 batches from the start, framed and checked in one call"},
    {"walk_many", (PyCFunction)walk_many, METH_VARARGS,
     "walk_many(datas, min_offsets, validate_crc, check_records, borrow) -> [walk_batches "
     "result, ...]: each data walked, with the GIL released once for them all when large"},
#ifndef _WIN32
    {"recv_rest", (PyCFunction)recv_rest, METH_VARARGS,
     "recv_rest(fd, buffer, pos, end, budget_us, idle_us) -> (read, errno): bytes read "
     "from the socket into buffer[pos:end] with the GIL released, while they keep coming, "
     "and the socket's error (0: none; see kpax.broker.connection)"},
#endif
    {"adopt_record", (PyCFunction)adopt_record, METH_VARARGS,
     "adopt_record(type, nfields): a consumer record NamedTuple made cheaper to build, "
     "read and free (kpax.consumer.record)"},
    {"untrack", (PyCFunction)untrack, METH_O,
     "untrack(t) -> t: the cyclic GC stops tracking tuple t (whose items cannot lead "
     "back to it)"},
    {"frame_buffer", (PyCFunction)frame_buffer, METH_O,
     "frame_buffer(size) -> bytearray of size bytes, not initialised (a response frame's "
     "buffer, filled by the socket)"},
    {"crc32c_hardware", (PyCFunction)crc32c_hardware, METH_NOARGS,
     "crc32c_hardware() -> bool: whether crc32c uses the CPU's crc32 instruction"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_speedups", "kpax.proto._speedups: the RecordBatch v2 loops in C.",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    crc_init();
    PyObject *errors = PyImport_ImportModule("kpax.proto.errors");
    if (errors == NULL)
        return NULL;
    CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (CorruptRecordError == NULL)
        return NULL;
    EmptyTuple = PyTuple_New(0);
    if (EmptyTuple == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
