/*
 * kpax.producer._sendpath -- the producer's per-record send path in C.
 *
 * Role: optional accelerator for kpax.producer (the accumulator and the two
 * faces' send). It does, for the common record, exactly what the pure-Python
 * path does -- AsyncProducer._append then Accumulator.append -- and hands every
 * other case to that path, which stays the reference (KPAX_PURE_PYTHON=1 or a
 * build without a compiler runs it alone):
 *
 *   Lock()
 *       A non-reentrant lock (acquire/release/context manager) the accumulator
 *       uses, so that C can take it without calling into Python. Waiting for it
 *       releases the GIL.
 *
 *   murmur2(data) -> int
 *       Kafka's murmur2 of a bytes object, unsigned 32 bits (Java's bits).
 *
 *   cumulative_weights(values, keys, header_bytes) -> list
 *       send_many's cumulative record weights (kpax.producer.planning), or
 *       NotImplemented when an item is not bytes or None.
 *
 *   key_columns(values, keys, n) -> list of (partition, values, keys, positions)
 *       send_many's keyed records split by their default partition
 *       (toPositive(murmur2(key)) % n), partitions in ascending order, each
 *       column's records in call order with their positions in the call; or
 *       NotImplemented when a key is not bytes (None: the Python path).
 *
 *   Appender(accumulator, num_partitions, future_type, max_record, slow)
 *       .try_append(topic, value, key, partition, timestamp, headers)
 *           -> the record's future, or None when the record needs the Python
 *              path: a value or key that is not bytes/None, headers, an
 *              unknown topic, a bad partition or timestamp, a record larger
 *              than max_record, a keyless record whose sticky partition is not
 *              chosen yet, no open batch or no room in it. Nothing is changed
 *              when it returns None.
 *       .send(topic, value=None, key=None, *, partition=None, timestamp=None,
 *             headers=None, callback=None)
 *           -> try_append, then fut.add_callback(callback); any other case
 *              calls slow(...) with the very same arguments. A callback that
 *              is not callable raises TypeError first (nothing appended).
 *       .asend(topic, value=None, key=None, *, partition=None, timestamp=None,
 *              headers=None, callback=None)
 *           -> the asyncio face's send: for the common record an already
 *              finished awaitable (Sent) whose await gives the record's
 *              future; any other case returns slow(...) (the Python send,
 *              which buffers at the call too: kpax.producer.sent) with the
 *              very same arguments.
 *       .enabled  (settable) False sends every call to the Python path (a
 *              closed producer; sends waiting to be buffered in call order).
 *
 *   Sent
 *       What asend returns for a record appended in C: a coroutine-like object
 *       (__await__, send, throw, close; registered as a
 *       collections.abc.Coroutine by kpax.producer.fastpath, so
 *       asyncio.create_task and gather take it) that is already done: awaiting
 *       it returns the record's future at once, without a Python frame. Awaited
 *       twice, it raises RuntimeError, as a coroutine does. Dropped without
 *       being awaited (or closed) it warns, with kpax.producer.sent's text
 *       (RuntimeWarning: the record is sent all the same), unless it was made
 *       in a delivery callback.
 *
 *   enter_callbacks(), leave_callbacks(), in_callbacks() -> bool
 *       A per-thread count of the delivery callbacks running
 *       (kpax.producer.batch brackets a batch's callbacks): a Sent made in one
 *       does not warn (a callback cannot await), and the Python path fails at
 *       once there when it would wait for buffer memory.
 *
 *   The fast path appends under the accumulator's lock to the open batch's
 *   columns (values, keys, timestamps: three list appends, a size sum), as the
 *   Python path does, and builds the future (batch, index, timestamp): no
 *   other object per record. A record's size is counted as the Python path
 *   counts it (kpax.producer.accumulator.record_weight, plus its batch's part:
 *   attributes, timestamp delta, offset-delta bound), so both fill batches
 *   alike. Sealing, encoding and sending are unchanged.
 *
 * Imports: Python's C API only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <structmember.h>
#include <stdint.h>
#include <time.h>

/* ------------------------------------------------------------------ Lock */

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    int locked;
} LockObject;

static int
lock_acquire_raw(LockObject *self)
{
    if (PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
        self->locked = 1;
        return 1;
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = PyThread_acquire_lock(self->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
    if (ok)
        self->locked = 1;
    return ok;
}

static inline void
lock_release_raw(LockObject *self)
{
    self->locked = 0;
    PyThread_release_lock(self->lock);
}

static PyObject *
Lock_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Lock() takes no arguments");
        return NULL;
    }
    LockObject *self = (LockObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void
Lock_dealloc(LockObject *self)
{
    if (self->lock != NULL) {
        if (self->locked)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Lock_acquire(LockObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pd:acquire", kwlist, &blocking, &timeout))
        return NULL;
    if (!blocking) {
        if (PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
            self->locked = 1;
            Py_RETURN_TRUE;
        }
        Py_RETURN_FALSE;
    }
    if (timeout < 0) {
        if (!lock_acquire_raw(self))
            Py_RETURN_FALSE;
        Py_RETURN_TRUE;
    }
    PY_TIMEOUT_T us = (PY_TIMEOUT_T)(timeout * 1e6);
    PyLockStatus r;
    Py_BEGIN_ALLOW_THREADS
    r = PyThread_acquire_lock_timed(self->lock, us, 0);
    Py_END_ALLOW_THREADS
    if (r == PY_LOCK_ACQUIRED) {
        self->locked = 1;
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static PyObject *
Lock_enter(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!lock_acquire_raw(self)) {
        PyErr_SetString(PyExc_RuntimeError, "could not acquire the lock");
        return NULL;
    }
    Py_RETURN_TRUE;
}

static PyObject *
Lock_release(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    lock_release_raw(self);
    Py_RETURN_NONE;
}

static PyObject *
Lock_exit(LockObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return Lock_release(self, NULL);
}

static PyObject *
Lock_locked(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(self->locked);
}

static PyMethodDef Lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))Lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool"},
    {"release", (PyCFunction)Lock_release, METH_NOARGS, "release()"},
    {"locked", (PyCFunction)Lock_locked, METH_NOARGS, "locked() -> bool"},
    {"__enter__", (PyCFunction)Lock_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))Lock_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kpax.producer._sendpath.Lock",
    .tp_basicsize = sizeof(LockObject),
    .tp_dealloc = (destructor)Lock_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A non-reentrant lock that C code can take without calling Python.",
    .tp_methods = Lock_methods,
    .tp_new = Lock_new,
};

/* ------------------------------------------------------------------ murmur2 */

static uint32_t
murmur2_raw(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t n = length >> 2;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    Py_ssize_t tail = length & ~(Py_ssize_t)3;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)data[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[tail];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static PyObject *
murmur2(PyObject *module, PyObject *arg)
{
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "murmur2() takes bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return PyLong_FromUnsignedLong(
        murmur2_raw((const unsigned char *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg)));
}


/* ------------------------------------------------------------------ base types
 *
 * The fields the per-record path touches, as C structs: ProducerBatch,
 * PartitionQueue and RecordFuture (kpax.producer) subclass these, so C reads
 * and writes them directly while Python sees ordinary attributes.
 */

typedef struct {
    PyObject_HEAD
    PyObject *values;     /* list of bytes | None */
    PyObject *keys;       /* list of bytes | None */
    PyObject *timestamps; /* list of int */
    PyObject *headers;    /* None, or a list with one entry per record */
    Py_ssize_t size;      /* estimated record bytes */
    Py_ssize_t cap;       /* the record bytes its reserved memory holds */
} BatchBaseObject;

static int
BatchBase_traverse(BatchBaseObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->values);
    Py_VISIT(self->keys);
    Py_VISIT(self->timestamps);
    Py_VISIT(self->headers);
    return 0;
}

static int
BatchBase_clear(BatchBaseObject *self)
{
    Py_CLEAR(self->values);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->timestamps);
    Py_CLEAR(self->headers);
    return 0;
}

static void
BatchBase_dealloc(BatchBaseObject *self)
{
    PyObject_GC_UnTrack(self);
    BatchBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef BatchBase_members[] = {
    {"values", T_OBJECT_EX, offsetof(BatchBaseObject, values), 0, NULL},
    {"keys", T_OBJECT_EX, offsetof(BatchBaseObject, keys), 0, NULL},
    {"timestamps", T_OBJECT_EX, offsetof(BatchBaseObject, timestamps), 0, NULL},
    {"headers", T_OBJECT, offsetof(BatchBaseObject, headers), 0, NULL},
    {"size", T_PYSSIZET, offsetof(BatchBaseObject, size), 0, NULL},
    {"cap", T_PYSSIZET, offsetof(BatchBaseObject, cap), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BatchBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kpax.producer._sendpath.BatchBase",
    .tp_basicsize = sizeof(BatchBaseObject),
    .tp_dealloc = (destructor)BatchBase_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The columns of a producer batch (base of ProducerBatch).",
    .tp_traverse = (traverseproc)BatchBase_traverse,
    .tp_clear = (inquiry)BatchBase_clear,
    .tp_members = BatchBase_members,
    .tp_new = PyType_GenericNew,
};

typedef struct {
    PyObject_HEAD
    PyObject *open; /* the open batch or None */
} QueueBaseObject;

static int
QueueBase_traverse(QueueBaseObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->open);
    return 0;
}

static int
QueueBase_clear(QueueBaseObject *self)
{
    Py_CLEAR(self->open);
    return 0;
}

static void
QueueBase_dealloc(QueueBaseObject *self)
{
    PyObject_GC_UnTrack(self);
    QueueBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef QueueBase_members[] = {
    {"open", T_OBJECT, offsetof(QueueBaseObject, open), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject QueueBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kpax.producer._sendpath.QueueBase",
    .tp_basicsize = sizeof(QueueBaseObject),
    .tp_dealloc = (destructor)QueueBase_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The open batch of a partition queue (base of PartitionQueue).",
    .tp_traverse = (traverseproc)QueueBase_traverse,
    .tp_clear = (inquiry)QueueBase_clear,
    .tp_members = QueueBase_members,
    .tp_new = PyType_GenericNew,
};

typedef struct {
    PyObject_HEAD
    PyObject *batch;
    Py_ssize_t index;
    PyObject *timestamp;
} FutureBaseObject;

static int
FutureBase_traverse(FutureBaseObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->batch);
    Py_VISIT(self->timestamp);
    return 0;
}

static int
FutureBase_clear(FutureBaseObject *self)
{
    Py_CLEAR(self->batch);
    Py_CLEAR(self->timestamp);
    return 0;
}

static void
FutureBase_dealloc(FutureBaseObject *self)
{
    PyObject_GC_UnTrack(self);
    FutureBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
FutureBase_init(FutureBaseObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *batch, *ts;
    Py_ssize_t index;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "RecordFuture(batch, index, timestamp)");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OnO:RecordFuture", &batch, &index, &ts))
        return -1;
    Py_INCREF(batch);
    Py_XSETREF(self->batch, batch);
    self->index = index;
    Py_INCREF(ts);
    Py_XSETREF(self->timestamp, ts);
    return 0;
}

static PyMemberDef FutureBase_members[] = {
    {"_batch", T_OBJECT_EX, offsetof(FutureBaseObject, batch), 0, NULL},
    {"_index", T_PYSSIZET, offsetof(FutureBaseObject, index), 0, NULL},
    {"_timestamp", T_OBJECT_EX, offsetof(FutureBaseObject, timestamp), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject FutureBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kpax.producer._sendpath.FutureBase",
    .tp_basicsize = sizeof(FutureBaseObject),
    .tp_dealloc = (destructor)FutureBase_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A record's place: (batch, index, timestamp) (base of RecordFuture).",
    .tp_traverse = (traverseproc)FutureBase_traverse,
    .tp_clear = (inquiry)FutureBase_clear,
    .tp_members = FutureBase_members,
    .tp_init = (initproc)FutureBase_init,
    .tp_new = PyType_GenericNew,
};

/* A new future of `type` (a subclass of FutureBase) without calling __init__. */
static PyObject *
new_future(PyTypeObject *type, PyObject *batch, Py_ssize_t index, PyObject *ts)
{
    FutureBaseObject *f = (FutureBaseObject *)type->tp_alloc(type, 0);
    if (f == NULL)
        return NULL;
    Py_INCREF(batch);
    f->batch = batch;
    f->index = index;
    Py_INCREF(ts);
    f->timestamp = ts;
    return (PyObject *)f;
}

/* ------------------------------------------------------------------ Sent */

typedef struct {
    PyObject_HEAD
    PyObject *result; /* the record's future; NULL once awaited */
    int loud;         /* warn if dropped never awaited (not made in a delivery callback) */
} SentObject;

static PyTypeObject SentType;

static PyObject *
new_sent(PyObject *result, int loud) /* steals result */
{
    SentObject *s = PyObject_GC_New(SentObject, &SentType);
    if (s == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    s->result = result;
    s->loud = loud;
    PyObject_GC_Track(s);
    return (PyObject *)s;
}

static PyObject *s_topic;

/* The RuntimeWarning of a Sent dropped without being awaited (the record was
   buffered all the same): the text of kpax.producer.sent.never_awaited. Called
   from dealloc: the exception being handled, if any, is kept. */
static void
warn_never_awaited(PyObject *fut)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *saved = PyErr_GetRaisedException();
#else
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
#endif
    PyObject *topic = NULL;
    if (PyObject_TypeCheck(fut, &FutureBaseType) && ((FutureBaseObject *)fut)->batch != NULL)
        topic = PyObject_GetAttr(((FutureBaseObject *)fut)->batch, s_topic);
    if (topic == NULL) {
        PyErr_Clear();
        topic = Py_None;
        Py_INCREF(topic);
    }
    if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                         "kpax.aio.Producer.send() for topic %R was never awaited: the record "
                         "is sent all the same, but nothing will see its outcome (await send() "
                         "for its RecordFuture)",
                         topic) < 0)
        PyErr_WriteUnraisable(NULL); /* e.g. -W error: reported, never raised from dealloc */
    Py_DECREF(topic);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(saved);
#else
    PyErr_Restore(et, ev, tb);
#endif
}

static int
Sent_traverse(SentObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->result);
    return 0;
}

static int
Sent_clear(SentObject *self)
{
    Py_CLEAR(self->result);
    return 0;
}

static void
Sent_dealloc(SentObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->result != NULL && self->loud)
        warn_never_awaited(self->result);
    Py_CLEAR(self->result);
    PyObject_GC_Del(self);
}

static PyObject *
Sent_await(SentObject *self)
{
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *
reused(void)
{
    PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
    return NULL;
}

/* am_send: the interpreter's await (PyIter_Send) takes the result with no
   StopIteration made. */
static PySendResult
Sent_am_send(SentObject *self, PyObject *arg, PyObject **presult)
{
    if (self->result == NULL) {
        reused();
        *presult = NULL;
        return PYGEN_ERROR;
    }
    *presult = self->result; /* the reference passes to the caller */
    self->result = NULL;
    return PYGEN_RETURN;
}

/* The value as StopIteration(value), as a returning coroutine raises it. */
static PyObject *
Sent_finish(SentObject *self)
{
    if (self->result == NULL)
        return reused();
    PyObject *r = self->result;
    self->result = NULL;
    PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, r);
    Py_DECREF(r);
    if (stop != NULL) {
        PyErr_SetObject(PyExc_StopIteration, stop);
        Py_DECREF(stop);
    }
    return NULL;
}

static PyObject *
Sent_send(SentObject *self, PyObject *arg)
{
    return Sent_finish(self);
}

static PyObject *
Sent_throw(SentObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    /* Nothing left to run: the exception comes straight back, as from a
       coroutine that has not started (it is done at once, like one). */
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "throw expected 1 to 3 arguments");
        return NULL;
    }
    Py_CLEAR(self->result);
    PyObject *typ = args[0], *val = nargs > 1 ? args[1] : Py_None;
    if (PyExceptionInstance_Check(typ)) {
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
        return NULL;
    }
    if (PyExceptionClass_Check(typ)) {
        PyErr_SetObject(typ, val);
        return NULL;
    }
    PyErr_SetString(PyExc_TypeError,
                    "exceptions must be classes or instances deriving from BaseException");
    return NULL;
}

static PyObject *
Sent_close(SentObject *self, PyObject *unused)
{
    Py_CLEAR(self->result);
    Py_RETURN_NONE;
}

static PyObject *
Sent_iternext(SentObject *self)
{
    return Sent_finish(self);
}

static PyAsyncMethods Sent_as_async = {
    .am_await = (unaryfunc)Sent_await,
    .am_send = (sendfunc)Sent_am_send,
};

static PyMethodDef Sent_methods[] = {
    {"send", (PyCFunction)Sent_send, METH_O, "send(value): raises StopIteration(future)"},
    {"throw", (PyCFunction)(void (*)(void))Sent_throw, METH_FASTCALL,
     "throw(exc): raises exc (the send is done)"},
    {"close", (PyCFunction)Sent_close, METH_NOARGS, "close(): nothing to stop"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SentType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kpax.producer._sendpath.Sent",
    .tp_basicsize = sizeof(SentObject),
    .tp_dealloc = (destructor)Sent_dealloc,
    .tp_as_async = &Sent_as_async,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A finished send of kpax.aio.Producer: await it for the record's future.",
    .tp_traverse = (traverseproc)Sent_traverse,
    .tp_clear = (inquiry)Sent_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Sent_iternext,
    .tp_methods = Sent_methods,
};

/* ------------------------------------------------------------------ Appender */

static PyObject *s_headers, *s_partition;
static PyObject *s_value, *s_key, *s_timestamp, *s_callback, *s_add_callback;

#define MAX_TIMESTAMP INT64_MAX

#include "../proto/_varint.h" /* varint_size */

/* Bytes of a length field's varint (n >= 0). */
static inline Py_ssize_t
zz_size(Py_ssize_t n)
{
    return n < 64 ? 1 : n < 8192 ? 2 : varint_size((int64_t)n);
}

/* kpax.producer.accumulator.record_weight: key and value (length -1: None) with
 * their length varints, hb bytes of headers, and the record's own length varint
 * for a body of up to RECORD_FRAME_MAX (16) more bytes. */
static inline Py_ssize_t
record_weight(Py_ssize_t klen, Py_ssize_t vlen, Py_ssize_t hb)
{
    Py_ssize_t p = (klen > 0 ? klen + zz_size(klen) : 1) + (vlen > 0 ? vlen + zz_size(vlen) : 1) + hb;
    return p + zz_size(p + 16);
}

typedef struct {
    PyObject_HEAD
    PyObject *queues;         /* accumulator.queues: topic -> {partition -> PartitionQueue} */
    PyObject *sticky_states;  /* accumulator._sticky_states: topic -> _StickyState */
    LockObject *lock;         /* accumulator.lock */
    PyObject *num_partitions; /* topic -> partition count */
    PyTypeObject *future_type; /* RecordFuture (a FutureBase subclass) */
    PyObject *slow;           /* the Python send, for every other case */
    Py_ssize_t cap;           /* accumulator._cap: a batch's record bytes limit */
    Py_ssize_t off;           /* bytes of a batch's largest offset delta (accumulator._off) */
    Py_ssize_t max_record;    /* the producer's largest record (bytes, an upper bound) */
    int enabled;
} AppenderObject;

static int
Appender_traverse(AppenderObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->queues);
    Py_VISIT(self->sticky_states);
    Py_VISIT(self->lock);
    Py_VISIT(self->num_partitions);
    Py_VISIT(self->future_type);
    Py_VISIT(self->slow);
    return 0;
}

static int
Appender_clear(AppenderObject *self)
{
    Py_CLEAR(self->queues);
    Py_CLEAR(self->sticky_states);
    Py_CLEAR(self->lock);
    Py_CLEAR(self->num_partitions);
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->slow);
    return 0;
}

static void
Appender_dealloc(AppenderObject *self)
{
    PyObject_GC_UnTrack(self);
    Appender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Appender_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"accumulator", "num_partitions", "future_type", "max_record",
                             "slow", NULL};
    PyObject *acc, *nparts, *ftype, *slow;
    Py_ssize_t max_record;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!OnO:Appender", kwlist, &acc, &PyDict_Type,
                                     &nparts, &ftype, &max_record, &slow))
        return NULL;
    PyObject *queues = PyObject_GetAttrString(acc, "queues");
    PyObject *sticky = queues ? PyObject_GetAttrString(acc, "_sticky_states") : NULL;
    PyObject *lock = sticky ? PyObject_GetAttrString(acc, "lock") : NULL;
    PyObject *cap = lock ? PyObject_GetAttrString(acc, "_cap") : NULL;
    if (cap == NULL)
        goto fail;
    if (!PyDict_CheckExact(queues) || !PyDict_CheckExact(sticky)) {
        PyErr_SetString(PyExc_TypeError, "Appender: the accumulator's queues must be dicts");
        goto fail;
    }
    if (!PyType_Check(ftype) || !PyType_IsSubtype((PyTypeObject *)ftype, &FutureBaseType)) {
        PyErr_SetString(PyExc_TypeError, "Appender: future_type must subclass FutureBase");
        goto fail;
    }
    if (!PyObject_TypeCheck(lock, &LockType)) {
        PyErr_SetString(PyExc_TypeError, "Appender: the accumulator's lock must be a _sendpath.Lock");
        goto fail;
    }
    Py_ssize_t capv = PyLong_AsSsize_t(cap);
    if (capv == -1 && PyErr_Occurred())
        goto fail;
    AppenderObject *self = (AppenderObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        goto fail;
    self->queues = queues;
    self->sticky_states = sticky;
    self->lock = (LockObject *)lock;
    Py_INCREF(nparts);
    self->num_partitions = nparts;
    Py_INCREF(ftype);
    self->future_type = (PyTypeObject *)ftype;
    Py_INCREF(slow);
    self->slow = slow;
    self->cap = capv;
    self->off = varint_size((int64_t)(capv / 7 + 1));
    self->max_record = max_record;
    self->enabled = 1;
    Py_DECREF(cap);
    return (PyObject *)self;
fail:
    Py_XDECREF(queues);
    Py_XDECREF(sticky);
    Py_XDECREF(lock);
    Py_XDECREF(cap);
    return NULL;
}

/* Sentinel result (never returned to Python): "use the Python path". */
#define FALLBACK Py_NotImplemented

static inline int
headers_empty(PyObject *headers)
{
    if (headers == NULL || headers == Py_None)
        return 1;
    if (PyList_CheckExact(headers))
        return PyList_GET_SIZE(headers) == 0;
    if (PyTuple_CheckExact(headers))
        return PyTuple_GET_SIZE(headers) == 0;
    return 0;
}

/* The record's future (new reference), NULL with an exception, or FALLBACK. */
static PyObject *
fast_append(AppenderObject *self, PyObject *topic, PyObject *value, PyObject *key,
            PyObject *partition, PyObject *timestamp, PyObject *headers)
{
    if (!self->enabled || !PyUnicode_CheckExact(topic))
        return FALLBACK;
    Py_ssize_t vlen = 0, klen = 0;
    if (value != Py_None) {
        if (!PyBytes_CheckExact(value))
            return FALLBACK;
        vlen = PyBytes_GET_SIZE(value);
    }
    if (key != Py_None) {
        if (!PyBytes_CheckExact(key))
            return FALLBACK;
        klen = PyBytes_GET_SIZE(key);
    }
    if (!headers_empty(headers))
        return FALLBACK;
    Py_ssize_t weight = record_weight(key == Py_None ? -1 : klen, value == Py_None ? -1 : vlen, 1);
    if (weight + 16 > self->max_record)
        return FALLBACK;
    PyObject *nobj = PyDict_GetItemWithError(self->num_partitions, topic);
    if (nobj == NULL) {
        if (PyErr_Occurred())
            PyErr_Clear();
        return FALLBACK;
    }
    long n = PyLong_AsLong(nobj);
    if (n <= 0) {
        PyErr_Clear();
        return FALLBACK;
    }
    long part;
    if (partition != Py_None) {
        if (!PyLong_CheckExact(partition))
            return FALLBACK;
        int overflow = 0;
        part = PyLong_AsLongAndOverflow(partition, &overflow);
        if (overflow || part < 0 || part >= n)
            return FALLBACK;
    }
    else if (key != Py_None) {
        uint32_t h = murmur2_raw((const unsigned char *)PyBytes_AS_STRING(key), klen);
        part = (long)((h & 0x7fffffffu) % (uint32_t)n);
    }
    else if (n == 1) {
        part = 0;
    }
    else {
        part = -1; /* the topic's sticky partition, read under the lock */
    }
    int64_t ts;
    PyObject *tsobj;
    if (timestamp == Py_None) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        ts = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        tsobj = PyLong_FromLongLong(ts);
        if (tsobj == NULL)
            return NULL;
    }
    else {
        if (!PyLong_CheckExact(timestamp))
            return FALLBACK;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(timestamp, &overflow);
        if (overflow || v < -1)
            return FALLBACK; /* the Python path raises the error naming the field */
        ts = v;
        Py_INCREF(timestamp);
        tsobj = timestamp;
    }

    PyObject *result = FALLBACK;
    PyObject *pobj = NULL;
    if (!lock_acquire_raw(self->lock)) {
        Py_DECREF(tsobj);
        PyErr_SetString(PyExc_RuntimeError, "could not acquire the accumulator lock");
        return NULL;
    }
    if (part < 0) {
        PyObject *state = PyDict_GetItemWithError(self->sticky_states, topic);
        if (state == NULL)
            goto done;
        PyObject *sp = PyObject_GetAttr(state, s_partition);
        if (sp == NULL)
            goto error;
        part = PyLong_AsLong(sp);
        Py_DECREF(sp);
        if (part == -1 && PyErr_Occurred())
            goto error;
        if (part < 0 || part >= n)
            goto done;
    }
    PyObject *parts = PyDict_GetItemWithError(self->queues, topic);
    if (parts == NULL || !PyDict_CheckExact(parts))
        goto done;
    pobj = PyLong_FromLong(part);
    if (pobj == NULL)
        goto error;
    PyObject *pq = PyDict_GetItemWithError(parts, pobj); /* borrowed */
    if (pq == NULL || !PyObject_TypeCheck(pq, &QueueBaseType))
        goto done;
    PyObject *bobj = ((QueueBaseObject *)pq)->open;
    if (bobj == NULL || !PyObject_TypeCheck(bobj, &BatchBaseType))
        goto done;
    BatchBaseObject *batch = (BatchBaseObject *)bobj;
    PyObject *values = batch->values, *keys = batch->keys, *stamps = batch->timestamps,
             *bheaders = batch->headers;
    if (values == NULL || keys == NULL || stamps == NULL || !PyList_CheckExact(values) ||
        !PyList_CheckExact(keys) || !PyList_CheckExact(stamps) ||
        (bheaders != NULL && bheaders != Py_None && !PyList_CheckExact(bheaders)))
        goto done;
    Py_ssize_t index = PyList_GET_SIZE(values);
    if (index == 0 || PyList_GET_SIZE(keys) != index || PyList_GET_SIZE(stamps) != index)
        goto done;
    /* the batch's part: attributes, timestamp delta from its first record, offset delta */
    PyObject *first = PyList_GET_ITEM(stamps, 0);
    if (!PyLong_CheckExact(first))
        goto done;
    int overflow = 0;
    long long base = PyLong_AsLongLongAndOverflow(first, &overflow);
    long long delta;
    if (overflow || (base == -1 && PyErr_Occurred()) || __builtin_sub_overflow(ts, base, &delta))
        goto done;
    Py_ssize_t total = batch->size + weight + 1 + varint_size((int64_t)delta) + self->off;
    if (total > batch->cap)
        goto done; /* full: the Python path grows its memory or closes it */
    /* Append to every column; on failure (memory) take back what was added. */
    if (PyList_Append(values, value) < 0)
        goto error;
    if (PyList_Append(keys, key) < 0) {
        PyList_SetSlice(values, index, index + 1, NULL);
        goto error;
    }
    if (PyList_Append(stamps, tsobj) < 0) {
        PyList_SetSlice(values, index, index + 1, NULL);
        PyList_SetSlice(keys, index, index + 1, NULL);
        goto error;
    }
    if (bheaders != NULL && bheaders != Py_None && PyList_Append(bheaders, Py_None) < 0) {
        PyList_SetSlice(values, index, index + 1, NULL);
        PyList_SetSlice(keys, index, index + 1, NULL);
        PyList_SetSlice(stamps, index, index + 1, NULL);
        goto error;
    }
    batch->size = total;
    /* The future is built after the lock is released (an allocation may run the
       cyclic GC, and with it arbitrary finalizers); the reference taken here
       keeps the batch alive should the sender complete it meanwhile. */
    Py_INCREF(bobj);
    lock_release_raw(self->lock);
    result = new_future(self->future_type, bobj, index, tsobj);
    Py_DECREF(bobj);
    goto out;
error:
    result = NULL;
done:
    if (result == FALLBACK && PyErr_Occurred())
        PyErr_Clear();
    lock_release_raw(self->lock);
out:
    Py_DECREF(tsobj);
    Py_XDECREF(pobj);
    return result;
}

static PyObject *
Appender_try_append(AppenderObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "try_append(topic, value, key, partition, timestamp, headers)");
        return NULL;
    }
    PyObject *r = fast_append(self, args[0], args[1], args[2], args[3], args[4], args[5]);
    if (r == FALLBACK)
        Py_RETURN_NONE;
    return r;
}

/* The delivery callbacks this thread is running (kpax.producer.batch runs a
   batch's callbacks between enter_callbacks() and leave_callbacks()): a send
   made in one is not warned about when never awaited (a callback cannot await),
   and the Python path fails at once when it would wait for buffer memory. */
#if defined(_MSC_VER)
static __declspec(thread) int callback_depth;
#else
static _Thread_local int callback_depth;
#endif

static PyObject *
enter_callbacks(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    callback_depth++;
    Py_RETURN_NONE;
}

static PyObject *
leave_callbacks(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    if (callback_depth > 0)
        callback_depth--;
    Py_RETURN_NONE;
}

static PyObject *
in_callbacks(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(callback_depth > 0);
}

/* TypeError for a callback that cannot be called (kpax.producer.planning.check_callback). */
static PyObject *
bad_callback(PyObject *callback)
{
    PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(callback), "__name__");
    if (name == NULL)
        return NULL;
    PyErr_Format(PyExc_TypeError, "callback must be a callable fn(metadata, error), not %R (%S)",
                 callback, name);
    Py_DECREF(name);
    return NULL;
}

/* send's and asend's common part: the record's future (new reference, its
   callback added), NULL with an exception, or FALLBACK for the Python path. */
static PyObject *
send_fast(AppenderObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *topic = NULL, *value = Py_None, *key = Py_None, *partition = Py_None,
             *timestamp = Py_None, *headers = Py_None, *callback = Py_None;
    if (nargs < 1 || nargs > 3)
        return FALLBACK;
    topic = args[0];
    if (nargs > 1)
        value = args[1];
    if (nargs > 2)
        key = args[2];
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            PyObject *v = args[nargs + i];
            if (name == s_partition)
                partition = v;
            else if (name == s_timestamp)
                timestamp = v;
            else if (name == s_headers)
                headers = v;
            else if (name == s_callback)
                callback = v;
            else if (name == s_key && nargs < 3)
                key = v;
            else if (name == s_value && nargs < 2)
                value = v;
            else
                return FALLBACK; /* not interned, repeated or unknown: let Python sort it out */
        }
    }
    if (callback != Py_None && !PyCallable_Check(callback))
        return bad_callback(callback); /* before anything is appended */
    PyObject *fut = fast_append(self, topic, value, key, partition, timestamp, headers);
    if (fut == FALLBACK || fut == NULL || callback == Py_None)
        return fut;
    PyObject *r = PyObject_CallMethodOneArg(fut, s_add_callback, callback);
    if (r == NULL) {
        Py_DECREF(fut);
        return NULL;
    }
    Py_DECREF(r);
    return fut;
}

static PyObject *
Appender_send(AppenderObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *fut = send_fast(self, args, nargsf, kwnames);
    if (fut == FALLBACK)
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    return fut;
}

static PyObject *
Appender_asend(AppenderObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *fut = send_fast(self, args, nargsf, kwnames);
    if (fut == FALLBACK)
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    if (fut == NULL)
        return NULL;
    return new_sent(fut, callback_depth == 0);
}

static PyObject *
Appender_get_enabled(AppenderObject *self, void *closure)
{
    return PyBool_FromLong(self->enabled);
}

static int
Appender_set_enabled(AppenderObject *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete enabled");
        return -1;
    }
    int t = PyObject_IsTrue(value);
    if (t < 0)
        return -1;
    self->enabled = t;
    return 0;
}

static PyGetSetDef Appender_getset[] = {
    {"enabled", (getter)Appender_get_enabled, (setter)Appender_set_enabled,
     "False: every call takes the Python path", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Appender_methods[] = {
    {"try_append", (PyCFunction)(void (*)(void))Appender_try_append, METH_FASTCALL,
     "try_append(topic, value, key, partition, timestamp, headers) -> future or None"},
    {"send", (PyCFunction)(void (*)(void))Appender_send, METH_FASTCALL | METH_KEYWORDS,
     "send(topic, value=None, key=None, *, partition=None, timestamp=None, headers=None, "
     "callback=None) -> future"},
    {"asend", (PyCFunction)(void (*)(void))Appender_asend, METH_FASTCALL | METH_KEYWORDS,
     "asend(topic, value=None, key=None, *, partition=None, timestamp=None, headers=None, "
     "callback=None) -> awaitable of the future"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kpax.producer._sendpath.Appender",
    .tp_basicsize = sizeof(AppenderObject),
    .tp_dealloc = (destructor)Appender_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The per-record send path of one producer (see the module docstring).",
    .tp_traverse = (traverseproc)Appender_traverse,
    .tp_clear = (inquiry)Appender_clear,
    .tp_methods = Appender_methods,
    .tp_getset = Appender_getset,
    .tp_new = Appender_new,
};

/* ------------------------------------------------------------------ module */

/* ------------------------------------------------------------------ weights */

/* cumulative_weights(values, keys, header_bytes) -> list: kpax.producer.planning's
 * _cumulative for lists of bytes/None (keys None: all keyless); NotImplemented
 * for anything else (the Python function answers then). */
static PyObject *
cumulative_weights(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "cumulative_weights(values, keys, header_bytes)");
        return NULL;
    }
    PyObject *values = args[0], *keys = args[1];
    Py_ssize_t hb = PyLong_AsSsize_t(args[2]);
    if (hb == -1 && PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(values) || (keys != Py_None && !PyList_CheckExact(keys)))
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (keys != Py_None && PyList_GET_SIZE(keys) != n)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *out = PyList_New(n + 1);
    if (out == NULL)
        return NULL;
    long long total = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (i > 0) {
            PyObject *v = PyList_GET_ITEM(values, i - 1);
            PyObject *k = keys == Py_None ? Py_None : PyList_GET_ITEM(keys, i - 1);
            if ((v != Py_None && !PyBytes_CheckExact(v)) || (k != Py_None && !PyBytes_CheckExact(k))) {
                Py_DECREF(out);
                Py_RETURN_NOTIMPLEMENTED;
            }
            Py_ssize_t vl = v == Py_None ? -1 : PyBytes_GET_SIZE(v);
            Py_ssize_t kl = k == Py_None ? -1 : PyBytes_GET_SIZE(k);
            total += record_weight(kl, vl, hb);
        }
        PyObject *c = PyLong_FromLongLong(total);
        if (c == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, c);
    }
    return out;
}

/* key_columns(values, keys, n): see the top of the file. */
static PyObject *
key_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "key_columns(values, keys, n)");
        return NULL;
    }
    PyObject *values = args[0], *keys = args[1];
    Py_ssize_t n = PyLong_AsSsize_t(args[2]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n <= 0 || n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "key_columns: n must be a positive partition count");
        return NULL;
    }
    if (!PyList_CheckExact(values) || !PyList_CheckExact(keys) ||
        PyList_GET_SIZE(values) != PyList_GET_SIZE(keys))
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t len = PyList_GET_SIZE(keys);
    int32_t *target = PyMem_Malloc((size_t)(len > 0 ? len : 1) * sizeof(int32_t));
    Py_ssize_t *count = PyMem_Calloc((size_t)n, sizeof(Py_ssize_t));
    PyObject *out = NULL, **cols = NULL;
    if (target == NULL || count == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        if (!PyBytes_CheckExact(k)) {
            out = Py_NewRef(Py_NotImplemented);
            goto done;
        }
        uint32_t h = murmur2_raw((const unsigned char *)PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k));
        int32_t p = (int32_t)((h & 0x7fffffffu) % (uint32_t)n);
        target[i] = p;
        count[p]++;
    }
    Py_ssize_t used = 0;
    for (Py_ssize_t p = 0; p < n; p++)
        used += count[p] > 0;
    /* per partition used: its values, keys and positions lists, filled in call order */
    cols = PyMem_Calloc((size_t)(used > 0 ? used : 1) * 3, sizeof(PyObject *));
    Py_ssize_t *slot = PyMem_Malloc((size_t)n * sizeof(Py_ssize_t));
    if (cols == NULL || slot == NULL) {
        PyMem_Free(slot);
        PyErr_NoMemory();
        goto done;
    }
    out = PyList_New(used);
    if (out == NULL) {
        PyMem_Free(slot);
        goto done;
    }
    Py_ssize_t c = 0;
    for (Py_ssize_t p = 0; p < n; p++) {
        slot[p] = -1;
        if (count[p] == 0)
            continue;
        PyObject *v = PyList_New(count[p]), *k = PyList_New(count[p]), *pos = PyList_New(count[p]);
        PyObject *part = PyLong_FromSsize_t(p);
        PyObject *t = (v && k && pos && part) ? PyTuple_Pack(4, part, v, k, pos) : NULL;
        Py_XDECREF(part);
        if (t == NULL) {
            Py_XDECREF(v);
            Py_XDECREF(k);
            Py_XDECREF(pos);
            PyMem_Free(slot);
            Py_CLEAR(out);
            goto done;
        }
        cols[3 * c] = v;
        cols[3 * c + 1] = k;
        cols[3 * c + 2] = pos;
        Py_DECREF(v);  /* (the tuple holds them) */
        Py_DECREF(k);
        Py_DECREF(pos);
        PyList_SET_ITEM(out, c, t);
        slot[p] = c++;
        count[p] = 0; /* from here: how many are filled */
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_ssize_t at = slot[target[i]];
        Py_ssize_t j = count[target[i]]++;
        PyObject *where = PyLong_FromSsize_t(i);
        if (where == NULL) {
            PyMem_Free(slot);
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(cols[3 * at], j, Py_NewRef(PyList_GET_ITEM(values, i)));
        PyList_SET_ITEM(cols[3 * at + 1], j, Py_NewRef(PyList_GET_ITEM(keys, i)));
        PyList_SET_ITEM(cols[3 * at + 2], j, where);
    }
    PyMem_Free(slot);
done:
    PyMem_Free(target);
    PyMem_Free(count);
    PyMem_Free(cols);
    return out;
}

static PyMethodDef module_methods[] = {
    {"murmur2", (PyCFunction)murmur2, METH_O, "murmur2(data) -> int (unsigned 32 bits)"},
    {"enter_callbacks", (PyCFunction)enter_callbacks, METH_NOARGS,
     "enter_callbacks(): this thread starts running delivery callbacks"},
    {"leave_callbacks", (PyCFunction)leave_callbacks, METH_NOARGS,
     "leave_callbacks(): this thread is done running delivery callbacks"},
    {"in_callbacks", (PyCFunction)in_callbacks, METH_NOARGS,
     "in_callbacks() -> bool: whether this thread runs delivery callbacks now"},
    {"cumulative_weights", (PyCFunction)(void (*)(void))cumulative_weights, METH_FASTCALL,
     "cumulative_weights(values, keys, header_bytes) -> list, or NotImplemented"},
    {"key_columns", (PyCFunction)(void (*)(void))key_columns, METH_FASTCALL,
     "key_columns(values, keys, n) -> [(partition, values, keys, positions)], or NotImplemented"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "kpax.producer._sendpath",
    "The producer's per-record send path in C (see kpax/producer/_sendpath.c).", -1,
    module_methods,
};

#define INTERN(var, text)                                                                      \
    do {                                                                                       \
        var = PyUnicode_InternFromString(text);                                                \
        if (var == NULL)                                                                       \
            return NULL;                                                                       \
    } while (0)

PyMODINIT_FUNC
PyInit__sendpath(void)
{
    INTERN(s_headers, "headers");
    INTERN(s_partition, "partition");
    INTERN(s_value, "value");
    INTERN(s_key, "key");
    INTERN(s_timestamp, "timestamp");
    INTERN(s_callback, "callback");
    INTERN(s_add_callback, "add_callback");
    INTERN(s_topic, "topic");
    if (PyType_Ready(&LockType) < 0 || PyType_Ready(&AppenderType) < 0 ||
        PyType_Ready(&BatchBaseType) < 0 || PyType_Ready(&QueueBaseType) < 0 ||
        PyType_Ready(&FutureBaseType) < 0 || PyType_Ready(&SentType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LockType);
    if (PyModule_AddObject(m, "Lock", (PyObject *)&LockType) < 0) {
        Py_DECREF(&LockType);
        Py_DECREF(m);
        return NULL;
    }
    PyTypeObject *types[] = {&AppenderType, &BatchBaseType, &QueueBaseType, &FutureBaseType,
                             &SentType};
    const char *names[] = {"Appender", "BatchBase", "QueueBase", "FutureBase", "Sent"};
    for (int i = 0; i < 5; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
