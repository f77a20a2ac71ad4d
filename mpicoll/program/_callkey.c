/* mpicoll.program._callkey: the plan cache's key of a blocking call, compiled.
 *
 * It decides as mpicoll.program.callkey._call_key (the pure-Python one, which stays the
 * definition): two calls get equal keys exactly when they get equal Python keys,
 * and None exactly when the Python key is None.  The key is bytes: every part of
 * the Python key in a prefix code (see "the key as bytes" below).  It handles
 * the common argument forms itself (NumPy arrays, ints, None, MPI.IN_PLACE,
 * predefined ops, [buf, count, datatype]-style specs whose buffer is a NumPy
 * array or a bytes-like object, and counts in ints, lists, tuples or
 * array.array); for anything else it returns the Python function's tuple, which
 * never equals a bytes key.  A key is built
 * on every blocking call, and in Python that was the largest part of a cached
 * call's cost.
 *
 * The same module runs the whole hit of a blocking call (run, in _callrun.c),
 * with the key built here.
 *
 * What it reads of Python objects is declared in READS (exported): the
 * attribute of an mpicoll.Comm that holds its state, the fields of that state
 * (mpicoll.program.state.HOT_FIELDS) and of a cache entry.  A test checks them
 * against the Python classes, so a rename fails a test instead of silently
 * turning every call into a miss.
 *
 * The module is optional: when it is not built, mpicoll uses the Python ones.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_callkey.h"

/* set once by init(): the objects the Python key builder uses */
PyObject *fallback;                 /* mpicoll.program.callkey._call_key */
static PyObject *generation_cell;   /* mpicoll.config.GENERATION: [n], the configuration's generation */
static PyObject *ndarray_type;      /* numpy.ndarray */
static PyObject *buffer_types;      /* frozenset: bytearray, bytes, memoryview, mmap.mmap, array.array */
static PyObject *predefined_types;  /* {id(MPI.DOUBLE): ("dt", handle), ...}: read into types_table */
static PyObject *predefined_ops;    /* {id(MPI.SUM): ("op", handle), ...}: read into ops_table */
static PyObject *mpi_op_type;       /* MPI.Op */
static PyObject *in_place;          /* MPI.IN_PLACE */
static PyObject *array_type;        /* array.array */

static PyObject *s_dtype, *s_typecode, *s_b;
PyObject *s_state, *s_tags, *s_entries, *s_slow_path, *s_used, *s_run, *s_recorder, *s_calls, *s_what;   /* declared in _callkey.h */
PyObject *empty_tuple;

#define FALLBACK ((PyObject *)1)   /* "let the Python function decide" */

/* ---- the key as bytes ----
 * Every part of the Python key is written as a tag byte and a payload of fixed size or with its length
 * first, so the encoding is a prefix code: two calls get equal bytes only if every part is equal.  It is
 * as fine as the Python key or finer (objects compared by equality there are compared by identity here
 * where that is safe), so an equal compiled key implies an equal Python key.  Bytes hash and compare in
 * one pass each, where a tuple of a dozen parts costs a call per part. */
#define KEY_BYTES 1024
typedef struct {
    unsigned char bytes[KEY_BYTES];
    Py_ssize_t n;
    int overflow;   /* too long: the Python function decides */
} Key;

static void
put(Key *key, const void *data, size_t len)
{
    if (key->overflow || (size_t)(KEY_BYTES - key->n) < len) {
        key->overflow = 1;
        return;
    }
    memcpy(key->bytes + key->n, data, len);
    key->n += (Py_ssize_t)len;
}

static void
put_tag(Key *key, char tag)
{
    put(key, &tag, 1);
}

static void
put_u64(Key *key, uint64_t value)
{
    put(key, &value, sizeof value);
}

/* an object by identity: only for objects that outlive every key naming them (static types, MPI's and
   NumPy's predefined objects, and dtypes, which a cache entry keeps alive: see plan.held) */
static void
put_pointer(Key *key, char tag, const void *obj)
{
    put_tag(key, tag);
    put_u64(key, (uint64_t)(uintptr_t)obj);
}

/* a str by content; -1 with an exception set if it cannot be encoded */
static int
put_str(Key *key, PyObject *text)
{
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    if (utf8 == NULL)
        return -1;
    put_tag(key, 's');
    put_u64(key, (uint64_t)len);
    put(key, utf8, (size_t)len);
    return 0;
}

/* an exact int that fits in 64 bits: 0, or 1 (fall back) */
static int
put_int(Key *key, PyObject *obj)
{
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 1;
    }
    put_tag(key, 'i');
    put_u64(key, (uint64_t)value);
    return 0;
}

/* (address, nbytes, readonly) of obj's memory: 0, or -1 with no exception set: not a buffer MPI.buffer
   would take (the key is then None) */
static int
put_memory(Key *key, PyObject *obj)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_ANY_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return -1;
    }
    put_tag(key, 'm');
    put_u64(key, (uint64_t)(uintptr_t)view.buf);
    put_u64(key, (uint64_t)view.len);
    put_tag(key, view.readonly ? 'r' : 'w');
    PyBuffer_Release(&view);
    return 0;
}

/* the element format a bytes-like object is read as (as plan._element): a new reference */
static PyObject *
element(PyObject *obj)
{
    if (PyMemoryView_Check(obj))
        return PyObject_GetAttrString(obj, "format");
    if ((PyObject *)Py_TYPE(obj) == array_type)
        return PyObject_GetAttr(obj, s_typecode);
    Py_INCREF(s_b);   /* bytearray, bytes, mmap.mmap */
    return s_b;
}

/* a NumPy array's memory and dtype (the entry keeps the dtype alive); 0, -1 (key None), -2 (error) */
static int
put_array(Key *key, PyObject *obj)
{
    int rc = put_memory(key, obj);
    if (rc != 0)
        return rc;
    PyObject *dtype = PyObject_GetAttr(obj, s_dtype);
    if (dtype == NULL)
        return -2;
    put_pointer(key, 'd', dtype);
    Py_DECREF(dtype);
    return 0;
}

/* a bytes-like object's memory, type and element format; 0, -1 (key None), -2 (error) */
static int
put_bytes_like(Key *key, PyObject *obj)
{
    int rc = put_memory(key, obj);
    if (rc != 0)
        return rc;
    put_pointer(key, 't', Py_TYPE(obj));   /* bytearray, bytes, memoryview, mmap.mmap, array.array: static */
    PyObject *format = element(obj);
    if (format == NULL)
        return -2;
    rc = PyUnicode_Check(format) ? put_str(key, format) : -1;
    Py_DECREF(format);
    return rc < 0 ? -2 : 0;
}

/* counts or displacements given by value (as plan._value for the forms handled here: an int; an
   array.array of integers; a list or tuple of these, nested at most twice, as (counts, displs) is):
   0, -2 (error), 1 (fall back) */
static int
put_value(Key *key, PyObject *obj, int depth)
{
    if (PyLong_CheckExact(obj))
        return put_int(key, obj);
    if ((PyList_CheckExact(obj) || PyTuple_CheckExact(obj)) && depth < 2) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        PyObject **items = PySequence_Fast_ITEMS(obj);
        put_tag(key, PyList_CheckExact(obj) ? 'L' : 'T');
        put_u64(key, (uint64_t)n);
        for (Py_ssize_t j = 0; j < n; j++) {
            int rc = put_value(key, items[j], depth + 1);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    if ((PyObject *)Py_TYPE(obj) == array_type) {
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
            return -2;
        const char *code = view.format;
        int integers = code != NULL && code[0] != 0 && code[1] == 0 && strchr("bBhHiIlLqQ", code[0]) != NULL;
        if (integers && view.len <= 4096 * view.itemsize) {
            put_tag(key, 'c');
            put_tag(key, code[0]);
            put_u64(key, (uint64_t)view.len);
            put(key, view.buf, (size_t)view.len);
        }
        PyBuffer_Release(&view);
        return integers && view.len <= 4096 * view.itemsize ? 0 : 1;
    }
    return 1;
}

/* ---- predefined datatypes and ops: recognised by address (as plan._PREDEFINED_TYPES's ids) ----
   An open-addressing table from object address to handle, filled by init() from the Python tables. */
#define TABLE_SLOTS 1024
typedef struct {
    const void *address[TABLE_SLOTS];
    uint64_t handle[TABLE_SLOTS];
} Table;
static Table types_table, ops_table;

static Py_ssize_t
slot_of(const void *address)
{
    return (Py_ssize_t)(((uintptr_t)address >> 4) * 2654435761u % TABLE_SLOTS);
}

/* whether obj is predefined; its handle then in *handle */
static int
predefined(const Table *table, PyObject *obj, uint64_t *handle)
{
    for (Py_ssize_t i = slot_of(obj), probes = 0; probes < TABLE_SLOTS; i = (i + 1) % TABLE_SLOTS, probes++) {
        if (table->address[i] == obj) {
            *handle = table->handle[i];
            return 1;
        }
        if (table->address[i] == NULL)
            return 0;
    }
    return 0;
}

/* table filled from {id(obj): (kind, handle)}; -1 on error (the table is then left empty) */
static int
fill(Table *table, PyObject *ids)
{
    memset(table, 0, sizeof *table);
    if (PyDict_GET_SIZE(ids) > TABLE_SLOTS / 2) {
        PyErr_SetString(PyExc_ValueError, "init: more predefined objects than the table holds");
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *id, *part;
    while (PyDict_Next(ids, &pos, &id, &part)) {
        void *address = PyLong_AsVoidPtr(id);
        unsigned long long handle = PyTuple_Check(part) && PyTuple_GET_SIZE(part) == 2
                                    ? PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(part, 1)) : (unsigned long long)-1;
        if (address == NULL || PyErr_Occurred()) {
            memset(table, 0, sizeof *table);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "init: a predefined object's id is not an address");
            return -1;
        }
        Py_ssize_t i = slot_of(address);
        while (table->address[i] != NULL)
            i = (i + 1) % TABLE_SLOTS;
        table->address[i] = address;
        table->handle[i] = handle;
    }
    return 0;
}

/* a [buf, count, displ, datatype]-style spec: 0, -1 (key None), -2 (error), or 1 (fall back) */
static int
put_spec(Key *key, PyObject *spec)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(spec);
    if (n == 0)
        return -1;
    put_tag(key, PyList_CheckExact(spec) ? '[' : '(');
    put_u64(key, (uint64_t)n);
    PyObject **items = PySequence_Fast_ITEMS(spec);
    PyObject *obj = items[0];
    int rc;
    if ((PyObject *)Py_TYPE(obj) == ndarray_type) {
        rc = put_array(key, obj);
    }
    else {
        int known = PySet_Contains(buffer_types, (PyObject *)Py_TYPE(obj));
        rc = known < 0 ? -2 : known == 0 ? 1 : put_bytes_like(key, obj);
    }
    for (Py_ssize_t j = 1; j < n && rc == 0; j++) {
        uint64_t handle;
        if (PyLong_CheckExact(items[j])) {
            rc = put_int(key, items[j]);
        }
        else if (predefined(&types_table, items[j], &handle)) {
            put_tag(key, 'D');
            put_u64(key, handle);
        }
        else {
            rc = put_value(key, items[j], 0);   /* counts, displacements */
        }
    }
    return rc;
}

/* whether position i holds counts given by value (Reduce_scatter's recvcounts); -1 on error */
static int
by_value(PyObject *values, Py_ssize_t i)
{
    for (Py_ssize_t v = 0; v < PyTuple_GET_SIZE(values); v++) {
        Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(values, v));
        if (position == -1 && PyErr_Occurred())
            return -1;
        if (position == i)
            return 1;
    }
    return 0;
}

/* argument a: 0, -1 (key None), -2 (error), or 1 (fall back) */
static int
put_argument(Key *key, PyObject *a)
{
    PyTypeObject *t = Py_TYPE(a);
    uint64_t handle;
    if ((PyObject *)t == ndarray_type)
        return put_array(key, a);
    if (PyLong_CheckExact(a))
        return put_int(key, a);
    if (a == Py_None) {
        put_tag(key, 'N');
        return 0;
    }
    if (PyList_CheckExact(a) || PyTuple_CheckExact(a))
        return put_spec(key, a);
    if ((PyObject *)t == mpi_op_type) {
        if (!predefined(&ops_table, a, &handle))
            return 1;   /* a user-defined op: kept alive by the entry, in Python */
        put_tag(key, 'O');
        put_u64(key, handle);
        return 0;
    }
    if (a == in_place) {
        put_tag(key, 'P');
        return 0;
    }
    if (PySet_Contains(buffer_types, (PyObject *)t) == 1) {   /* a bytes-like object alone */
        put_tag(key, 'b');
        return put_bytes_like(key, a);
    }
    return 1;
}

/* ---- the keys made lately ----
 * A program repeats its calls, so the bytes of a key are most often those of a key made a moment ago.  The
 * newest key of each of MADE_SLOTS slots (chosen by the bytes' length and two of their words) is kept, and an
 * equal key is that object again: no allocation, and its hash, which bytes compute once (SipHash: the
 * largest part of a lookup's cost), is not computed again.  A bounded memo of immutable objects: equal bytes
 * are an equal key, whatever made them. */
#define MADE_SLOTS 16
static PyObject *made_keys[MADE_SLOTS];

static PyObject *
key_object(const Key *key)
{
    uint64_t middle = 0, last = 0;        /* a cheap choice of slot, not a hash to trust */
    Py_ssize_t n = key->n;
    memcpy(&middle, key->bytes + n / 2, n - n / 2 >= 8 ? 8 : (size_t)(n - n / 2));
    memcpy(&last, key->bytes + (n >= 8 ? n - 8 : 0), n >= 8 ? 8 : (size_t)n);
    uint64_t mix = ((uint64_t)n ^ middle ^ (last << 1)) * 0x9E3779B97F4A7C15ull;
    PyObject **slot = &made_keys[(mix >> 60) % MADE_SLOTS];
    PyObject *made = *slot;
    if (made != NULL && PyBytes_GET_SIZE(made) == key->n && memcmp(PyBytes_AS_STRING(made), key->bytes, key->n) == 0)
        return Py_NewRef(made);
    made = PyBytes_FromStringAndSize((const char *)key->bytes, key->n);
    if (made != NULL)
        Py_XSETREF(*slot, Py_NewRef(made));
    return made;
}

/* the key of the arguments argv[0 .. nargs) (bytes), None, or FALLBACK; NULL on error */
static PyObject *
build(PyObject *method, PyObject *const *argv, Py_ssize_t nargs, PyObject *algorithm, PyObject *values)
{
    if (!PyUnicode_CheckExact(algorithm))
        Py_RETURN_NONE;
    if (!PyTuple_Check(values) || !PyUnicode_CheckExact(method))
        return FALLBACK;
    PyObject *generation = PyList_GET_SIZE(generation_cell) == 1 ? PyList_GET_ITEM(generation_cell, 0) : NULL;
    if (generation == NULL || !PyLong_CheckExact(generation))
        return FALLBACK;
    Key key;
    key.n = 0;
    key.overflow = 0;
    if (put_str(&key, method) < 0 || put_str(&key, algorithm) < 0)
        return NULL;
    if (put_int(&key, generation) != 0)
        return FALLBACK;
    put_u64(&key, (uint64_t)nargs);
    for (Py_ssize_t i = 0; i < nargs; i++) {
        int counts = by_value(values, i);
        int rc = counts < 0 ? -2 : counts ? put_value(&key, argv[i], 0) : put_argument(&key, argv[i]);
        if (rc == -2)
            return NULL;
        if (rc == -1)
            Py_RETURN_NONE;
        if (rc == 1)
            return FALLBACK;
    }
    if (key.overflow)
        return FALLBACK;
    return key_object(&key);
}

/* the tuple of argv[0 .. n) */
PyObject *
tuple_of(PyObject *const *argv, Py_ssize_t n)
{
    PyObject *tuple = PyTuple_New(n);
    for (Py_ssize_t i = 0; tuple != NULL && i < n; i++) {
        Py_INCREF(argv[i]);
        PyTuple_SET_ITEM(tuple, i, argv[i]);
    }
    return tuple;
}

/* the key of a call, or None: build()'s, or the Python function's where build() cannot decide; args is the
   tuple of argv[0 .. nargs), or NULL (made here if the Python function needs it) */
PyObject *
key_of(PyObject *method, PyObject *const *argv, Py_ssize_t nargs, PyObject *args, PyObject *algorithm,
       PyObject *values)
{
    PyObject *key = build(method, argv, nargs, algorithm, values);
    if (key == NULL && PyErr_Occurred()) {   /* as the Python function: no key when an argument misbehaves */
        PyErr_Clear();
        key = FALLBACK;
    }
    if (key != FALLBACK)
        return key;
    PyObject *made = args == NULL ? tuple_of(argv, nargs) : NULL;
    if (args == NULL && made == NULL)
        return NULL;
    key = PyObject_CallFunctionObjArgs(fallback, method, args ? args : made, algorithm, values, NULL);
    Py_XDECREF(made);
    return key;
}

static PyObject *
call_key(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (argc < 3 || argc > 4) {
        PyErr_SetString(PyExc_TypeError, "call_key(method, args, algorithm, values=())");
        return NULL;
    }
    if (fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.program._callkey.init() was not called");
        return NULL;
    }
    PyObject *method = argv[0], *args = argv[1], *algorithm = argv[2];
    PyObject *values = argc == 4 ? argv[3] : empty_tuple;
    if (!PyTuple_Check(args))
        return PyObject_CallFunctionObjArgs(fallback, method, args, algorithm, values, NULL);
    return key_of(method, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), args, algorithm, values);
}

static PyObject *
init(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objects[8];
    if (!PyArg_ParseTuple(args, "OO!OO!O!O!OO:init", &objects[0], &PyList_Type, &objects[1], &objects[2],
                          &PyFrozenSet_Type, &objects[3], &PyDict_Type, &objects[4], &PyDict_Type, &objects[5],
                          &objects[6], &objects[7]))
        return NULL;
    PyObject **slots[8] = {&fallback, &generation_cell, &ndarray_type, &buffer_types,
                           &predefined_types, &predefined_ops, &mpi_op_type, &in_place};
    for (int i = 0; i < 8; i++) {
        Py_INCREF(objects[i]);
        Py_XSETREF(*slots[i], objects[i]);
    }
    if (fill(&types_table, predefined_types) < 0 || fill(&ops_table, predefined_ops) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"call_key", (PyCFunction)(void (*)(void))call_key, METH_FASTCALL,
     "call_key(method, args, algorithm, values=())\n--\n\nThe plan cache's key of a blocking call, or None "
     "(as mpicoll.program.callkey._call_key)."},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(comm, method, algorithm, *args)\n--\n\nRun a blocking call: its cached plan if it has one, else "
     "the communicator's slow path (as mpicoll.comm.dispatch.run_blocking)."},
    {"init_run", init_run, METH_VARARGS,
     "init_run(active, elsewhere, value_args, failed)\n--\n\nThe objects run reads besides the key's (mpicoll.comm.dispatch calls it "
     "once)."},
    {"start", (PyCFunction)(void (*)(void))start, METH_FASTCALL,
     "start(comm, method, args, algorithm)\n--\n\nStart a nonblocking call: a cached plan's last request "
     "started again where nothing else holds it, else Python's start (as mpicoll.comm.dispatch._start)."},
    {"init_start", init_start, METH_VARARGS,
     "init_start(state_class, plan_class, startable, start, start_drawn, restart, kind)\n--\n\nThe objects "
     "start reads (mpicoll.comm.dispatch calls it once)."},
    {"run_summing", (PyCFunction)(void (*)(void))run_summing, METH_FASTCALL,
     "run_summing(comm, method, algorithm, reproducible, *args)\n--\n\nRun a blocking summing call: the "
     "reproducible sum where it is wanted, else as run (as mpicoll.comm.summing._run_summing)."},
    {"start_summing", (PyCFunction)(void (*)(void))start_summing, METH_FASTCALL,
     "start_summing(comm, method, args, algorithm, reproducible)\n--\n\nStart a nonblocking summing call: "
     "the reproducible sum where it is wanted, else as start (as mpicoll.comm.summing._start_summing)."},
    {"init_summing", init_summing, METH_VARARGS,
     "init_summing(default, wanted, planned_allreduce, run, start)\n--\n\nThe reproducible mode's default and the reproducible forms "
     "(mpicoll.comm.summing calls it once)."},
    {"init", init, METH_VARARGS,
     "init(fallback, generation, ndarray, buffer_types, predefined_types, predefined_ops, "
     "Op, IN_PLACE)\n--\n\nThe objects the key is built from (mpicoll.program.callkey calls it once)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_callkey", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit__callkey(void)
{
    s_dtype = PyUnicode_InternFromString("dtype");
    s_typecode = PyUnicode_InternFromString("typecode");
    s_b = PyUnicode_InternFromString("B");
    s_state = PyUnicode_InternFromString("_state");
    s_tags = PyUnicode_InternFromString("tags");
    s_entries = PyUnicode_InternFromString("entries");
    s_slow_path = PyUnicode_InternFromString("slow_path");
    s_used = PyUnicode_InternFromString("used");
    s_run = PyUnicode_InternFromString("run");
    s_recorder = PyUnicode_InternFromString("recorder");
    s_calls = PyUnicode_InternFromString("calls");
    s_what = PyUnicode_InternFromString("what");
    empty_tuple = PyTuple_New(0);
    if (!s_dtype || !s_typecode || !s_b || !s_state || !s_tags || !s_entries || !s_slow_path || !s_used || !s_run
        || !s_recorder || !s_calls || !s_what || !empty_tuple)
        return NULL;
    PyObject *array_module = PyImport_ImportModule("array");
    if (array_module == NULL)
        return NULL;
    array_type = PyObject_GetAttrString(array_module, "array");
    Py_DECREF(array_module);
    if (array_type == NULL)
        return NULL;
    PyObject *made = PyModule_Create(&module);
    /* what run and start read, by the class that declares it (checked against Python by tests/unit/test_compiled_path.py) */
    PyObject *reads = made ? Py_BuildValue("{s(s)s(sssss)s(ssss)s(s)s(ss)}", "Comm", "_state", "CommState", "tags",
                                           "entries", "request_entries", "slow_path", "recorder", "Entry", "run",
                                           "used", "what", "program", "Recorder", "calls", "Plan", "lent",
                                           "spare") : NULL;
    if (reads == NULL || PyModule_AddObject(made, "READS", reads) < 0) {
        Py_XDECREF(reads);
        Py_XDECREF(made);
        return NULL;
    }
    return made;
}
