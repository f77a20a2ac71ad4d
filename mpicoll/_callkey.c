/* mpicoll._callkey: the plan cache's key of a blocking call, compiled.
 *
 * The same function as mpicoll.plan._call_key (the pure-Python one, which stays
 * the definition): it returns the very same tuple, or None, for the same
 * arguments.  It handles the common argument forms itself (NumPy arrays, ints,
 * None, MPI.IN_PLACE, predefined ops, [buf, count, datatype]-style specs whose
 * buffer is a NumPy array or a bytes-like object, and counts in ints, lists,
 * tuples or array.array); for anything else it
 * calls the Python function, so it never decides differently.  A key is built
 * on every blocking call, and in Python that was the largest part of a cached
 * call's cost.
 *
 * The module is optional: when it is not built, mpicoll uses the Python one.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* set once by init(): the objects the Python key builder uses */
static PyObject *fallback;          /* mpicoll.plan._call_key */
static PyObject *environ_data;      /* os.environ._data: bytes -> bytes */
static PyObject *selection_dict;    /* mpicoll.selection.__dict__ (holds _GENERATION) */
static PyObject *ndarray_type;      /* numpy.ndarray */
static PyObject *buffer_types;      /* frozenset: bytearray, bytes, memoryview, mmap.mmap, array.array */
static PyObject *predefined_types;  /* {id(MPI.DOUBLE): ("dt", handle), ...} */
static PyObject *predefined_ops;    /* {id(MPI.SUM): ("op", handle), ...} */
static PyObject *mpi_op_type;       /* MPI.Op */
static PyObject *in_place;          /* MPI.IN_PLACE */
static PyObject *array_type;        /* array.array */

static PyObject *s_algo, *s_debug, *s_gpu, *s_zero, *s_generation, *s_dtype, *s_typecode, *s_in_place, *s_b, *s_array;
static PyObject *s_tags, *s_plans, *s_timeout, *s_data, *s_used, *s_run, *s_tag_state;
static PyObject *empty_tuple;

#define FALLBACK ((PyObject *)1)   /* "let the Python function decide" */

/* (address, nbytes, readonly) of obj's memory, appended to parts; -1 with no exception set: not a buffer
   MPI.buffer would take (the key is then None) */
static int
append_memory(PyObject *parts, PyObject *obj)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_ANY_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return -1;
    }
    PyObject *address = PyLong_FromVoidPtr(view.buf);
    PyObject *nbytes = PyLong_FromSsize_t(view.len);
    PyObject *readonly = PyBool_FromLong(view.readonly);
    PyBuffer_Release(&view);
    int rc = (address && nbytes) ? 0 : -2;
    if (rc == 0 && (PyList_Append(parts, address) < 0 || PyList_Append(parts, nbytes) < 0
                    || PyList_Append(parts, readonly) < 0))
        rc = -2;
    Py_XDECREF(address);
    Py_XDECREF(nbytes);
    Py_DECREF(readonly);
    return rc;
}

/* the element format a bytes-like object is read as: as plan._element */
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

/* the element of plan._memory's key: a NumPy array's dtype, or (type, element format) of a bytes-like object */
static PyObject *
memory_element(PyObject *obj)
{
    if ((PyObject *)Py_TYPE(obj) == ndarray_type)
        return PyObject_GetAttr(obj, s_dtype);
    PyObject *format = element(obj);
    if (format == NULL)
        return NULL;
    PyObject *pair = PyTuple_Pack(2, (PyObject *)Py_TYPE(obj), format);
    Py_DECREF(format);
    return pair;
}

/* plan._memory(obj) appended to key as one tuple (address, nbytes, readonly, element): as append_memory */
static int
append_memory_part(PyObject *key, PyObject *obj)
{
    PyObject *parts = PyList_New(0);
    if (parts == NULL)
        return -2;
    int rc = append_memory(parts, obj);
    if (rc == 0) {
        PyObject *what = memory_element(obj);
        if (what == NULL || PyList_Append(parts, what) < 0)
            rc = -2;
        Py_XDECREF(what);
    }
    PyObject *memory = rc == 0 ? PyList_AsTuple(parts) : NULL;
    Py_DECREF(parts);
    if (rc != 0)
        return rc;
    if (memory == NULL || PyList_Append(key, memory) < 0) {
        Py_XDECREF(memory);
        return -2;
    }
    Py_DECREF(memory);
    return 0;
}

/* the key part of a count or counts given by value (as plan._value for the forms handled here: an int; an
   array.array of integers; a list or tuple of these, nested at most twice, as (counts, displs) is): a new
   reference, FALLBACK (let the Python function decide) or NULL (error) */
static PyObject *
value_part(PyObject *obj, int depth)
{
    if (PyLong_CheckExact(obj)) {
        Py_INCREF(obj);
        return obj;
    }
    if ((PyList_CheckExact(obj) || PyTuple_CheckExact(obj)) && depth < 2) {   /* (type, *map(_value, obj)) */
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        PyObject **items = PySequence_Fast_ITEMS(obj);
        PyObject *part = PyTuple_New(n + 1);
        if (part == NULL)
            return NULL;
        Py_INCREF(Py_TYPE(obj));
        PyTuple_SET_ITEM(part, 0, (PyObject *)Py_TYPE(obj));
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *item = value_part(items[j], depth + 1);
            if (item == NULL || item == FALLBACK) {
                Py_DECREF(part);
                return item;
            }
            PyTuple_SET_ITEM(part, j + 1, item);
        }
        return part;
    }
    if ((PyObject *)Py_TYPE(obj) == array_type) {   /* ("array", typecode, obj.tobytes()) */
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
            return NULL;
        const char *code = view.format;
        int integers = code != NULL && code[0] != 0 && code[1] == 0 && strchr("bBhHiIlLqQ", code[0]) != NULL;
        if (!integers || view.len > 4096 * view.itemsize) {
            PyBuffer_Release(&view);
            return FALLBACK;
        }
        PyObject *typecode = PyUnicode_FromString(code);
        PyObject *contents = PyBytes_FromStringAndSize(view.buf, view.len);
        PyBuffer_Release(&view);
        PyObject *part = typecode && contents ? PyTuple_Pack(3, s_array, typecode, contents) : NULL;
        Py_XDECREF(typecode);
        Py_XDECREF(contents);
        return part;
    }
    return FALLBACK;
}

/* value_part(obj) appended to key: 0, -2 (error), 1 (fall back) */
static int
append_value(PyObject *key, PyObject *obj)
{
    PyObject *part = value_part(obj, 0);
    if (part == NULL)
        return -2;
    if (part == FALLBACK)
        return 1;
    int rc = PyList_Append(key, part) < 0 ? -2 : 0;
    Py_DECREF(part);
    return rc;
}

/* the key parts of a [buf, count, displ, datatype]-style spec, appended to key: 0, -1 (key None),
   -2 (error), or 1 (fall back) */
static int
append_spec(PyObject *key, PyObject *spec)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(spec);
    if (n == 0)
        return -1;
    PyObject *length = PyLong_FromSsize_t(n);
    PyObject *head = length ? PyTuple_Pack(2, (PyObject *)Py_TYPE(spec), length) : NULL;
    Py_XDECREF(length);
    if (head == NULL || PyList_Append(key, head) < 0) {
        Py_XDECREF(head);
        return -2;
    }
    Py_DECREF(head);
    PyObject **items = PySequence_Fast_ITEMS(spec);
    PyObject *obj = items[0];
    if ((PyObject *)Py_TYPE(obj) == ndarray_type) {
        int rc = append_memory_part(key, obj);
        if (rc != 0)
            return rc;
    }
    else {
        int known = PySet_Contains(buffer_types, (PyObject *)Py_TYPE(obj));
        if (known <= 0)
            return known < 0 ? -2 : 1;
        int rc = append_memory(key, obj);
        if (rc != 0)
            return rc;
        PyObject *format = element(obj);
        if (format == NULL || PyList_Append(key, (PyObject *)Py_TYPE(obj)) < 0 || PyList_Append(key, format) < 0) {
            Py_XDECREF(format);
            return -2;
        }
        Py_DECREF(format);
    }
    for (Py_ssize_t j = 1; j < n; j++) {
        PyObject *item = items[j];
        if (PyLong_CheckExact(item)) {
            if (PyList_Append(key, item) < 0)
                return -2;
            continue;
        }
        PyObject *id = PyLong_FromVoidPtr(item);
        if (id == NULL)
            return -2;
        PyObject *part = PyDict_GetItemWithError(predefined_types, id);   /* borrowed */
        Py_DECREF(id);
        if (part == NULL) {
            if (PyErr_Occurred())
                return -2;
            int rc = append_value(key, item);   /* counts, displacements */
            if (rc != 0)
                return rc;
            continue;
        }
        if (PyList_Append(key, part) < 0)
            return -2;
    }
    return 0;
}

/* the key, None, or FALLBACK; NULL on error */
static PyObject *
build(PyObject *method, PyObject *args, PyObject *algorithm, PyObject *values)
{
    PyObject *debug = PyDict_GetItemWithError(environ_data, s_debug);   /* borrowed */
    if (debug == NULL && PyErr_Occurred())
        return NULL;
    if (debug != NULL && PyObject_IsTrue(debug) && PyObject_RichCompareBool(debug, s_zero, Py_NE) == 1)
        Py_RETURN_NONE;
    if (!PyUnicode_CheckExact(algorithm))
        Py_RETURN_NONE;
    if (!PyTuple_Check(args) || !PyTuple_Check(values))
        return FALLBACK;
    PyObject *algo = PyDict_GetItemWithError(environ_data, s_algo);
    PyObject *gpu = algo || !PyErr_Occurred() ? PyDict_GetItemWithError(environ_data, s_gpu) : NULL;
    PyObject *generation = PyErr_Occurred() ? NULL : PyDict_GetItemWithError(selection_dict, s_generation);
    if (generation == NULL)
        return PyErr_Occurred() ? NULL : FALLBACK;
    PyObject *key = PyList_New(0);
    if (key == NULL)
        return NULL;
    PyObject *head[5] = {method, algorithm, algo ? algo : Py_None, gpu ? gpu : Py_None, generation};
    for (int i = 0; i < 5; i++)
        if (PyList_Append(key, head[i]) < 0)
            goto error;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        PyTypeObject *t = Py_TYPE(a);
        int rc = 0;
        int by_value = 0;   /* a position of counts given by value (Reduce_scatter's recvcounts) */
        for (Py_ssize_t v = 0; v < PyTuple_GET_SIZE(values); v++) {
            Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(values, v));
            if (position == -1 && PyErr_Occurred())
                goto error;
            by_value |= position == i;
        }
        if (by_value) {
            rc = append_value(key, a);
        }
        else if ((PyObject *)t == ndarray_type) {
            rc = append_memory(key, a);
            if (rc == 0) {
                PyObject *dtype = PyObject_GetAttr(a, s_dtype);
                if (dtype == NULL || PyList_Append(key, dtype) < 0)
                    rc = -2;
                Py_XDECREF(dtype);
            }
        }
        else if (PyLong_CheckExact(a) || a == Py_None) {
            rc = PyList_Append(key, a) < 0 ? -2 : 0;
        }
        else if (PyList_CheckExact(a) || PyTuple_CheckExact(a)) {
            rc = append_spec(key, a);
        }
        else if ((PyObject *)t == mpi_op_type) {
            PyObject *id = PyLong_FromVoidPtr(a);
            PyObject *part = id ? PyDict_GetItemWithError(predefined_ops, id) : NULL;
            Py_XDECREF(id);
            if (part != NULL)
                rc = PyList_Append(key, part) < 0 ? -2 : 0;
            else
                rc = PyErr_Occurred() ? -2 : 1;   /* a user-defined op: kept alive by the entry, in Python */
        }
        else if (a == in_place) {
            rc = PyList_Append(key, s_in_place) < 0 ? -2 : 0;
        }
        else if (PySet_Contains(buffer_types, (PyObject *)t) == 1) {   /* a bytes-like object alone */
            rc = append_memory_part(key, a);
        }
        else {
            rc = 1;
        }
        if (rc == -2)
            goto error;
        if (rc == -1) {
            Py_DECREF(key);
            Py_RETURN_NONE;
        }
        if (rc == 1) {
            Py_DECREF(key);
            return FALLBACK;
        }
    }
    PyObject *result = PyList_AsTuple(key);
    Py_DECREF(key);
    return result;
error:
    Py_DECREF(key);
    return NULL;
}

/* the key of a call, or None: build()'s, or the Python function's where build() cannot decide */
static PyObject *
key_of(PyObject *method, PyObject *args, PyObject *algorithm, PyObject *values)
{
    PyObject *key = build(method, args, algorithm, values);
    if (key == NULL && PyErr_Occurred()) {   /* as the Python function: no key when an argument misbehaves */
        PyErr_Clear();
        key = FALLBACK;
    }
    if (key == FALLBACK)
        key = PyObject_CallFunctionObjArgs(fallback, method, args, algorithm, values, NULL);
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
        PyErr_SetString(PyExc_RuntimeError, "mpicoll._callkey.init() was not called");
        return NULL;
    }
    PyObject *values = argc == 4 ? argv[3] : empty_tuple;
    return key_of(argv[0], argv[1], argv[2], values);
}

/* ---- the whole hit of a blocking call: as mpicoll.comm._run_cached ---- */

static PyObject *active_requests;   /* mpicoll.exec.nonblocking.ACTIVE: started, unfinished mpicoll requests */
static PyObject *value_args;        /* mpicoll.comm._VALUE_ARGS: method -> positions of counts given by value */

/* tags[1] = tags[1] % tags[0] + 1, returned (Comm._next_tag(BLOCKING), inline); NULL on error */
static PyObject *
draw_tag(PyObject *comm, PyObject *state)
{
    PyObject *tags = PyDict_GetItemWithError(state, s_tags);   /* borrowed */
    if (tags == NULL && PyErr_Occurred())
        return NULL;
    PyObject *made = NULL;
    if (tags == NULL || !PyList_CheckExact(tags) || PyList_GET_SIZE(tags) < 2) {
        tags = made = PyObject_CallMethodNoArgs(comm, s_tag_state);
        if (tags == NULL)
            return NULL;
        if (!PyList_CheckExact(tags) || PyList_GET_SIZE(tags) < 2) {
            Py_DECREF(made);
            PyErr_SetString(PyExc_TypeError, "Comm._tag_state() must return a list of ints");
            return NULL;
        }
    }
    long long per_kind = PyLong_AsLongLong(PyList_GET_ITEM(tags, 0));
    long long last = PyLong_AsLongLong(PyList_GET_ITEM(tags, 1));
    PyObject *tag = NULL;
    if (!PyErr_Occurred()) {
        if (per_kind <= 0 || last < 0)
            PyErr_SetString(PyExc_ValueError, "Comm._tags holds a bad tag state");
        else
            tag = PyLong_FromLongLong(last % per_kind + 1);
    }
    if (tag != NULL) {
        Py_INCREF(tag);
        PyList_SetItem(tags, 1, tag);   /* steals one reference */
    }
    Py_XDECREF(made);
    return tag;
}

/* the cached plan's entry of this call (a new reference), or NULL: no entry (an error only if one is set) */
static PyObject *
cached_entry(PyObject *comm, PyObject *state, PyObject *method, PyObject *algorithm, PyObject *args)
{
    PyObject *plans = PyDict_GetItemWithError(state, s_plans);   /* borrowed */
    if (plans == NULL || plans == Py_None || PyList_GET_SIZE(active_requests) > 0)
        return NULL;
    PyObject *timeout = PyObject_GetAttr(comm, s_timeout);
    if (timeout == NULL)
        return NULL;
    Py_DECREF(timeout);
    if (timeout != Py_None)
        return NULL;
    PyObject *values = PyDict_GetItemWithError(value_args, method);   /* borrowed */
    if (values == NULL && PyErr_Occurred())
        return NULL;
    PyObject *key = key_of(method, args, algorithm, values ? values : empty_tuple);
    if (key == NULL || key == Py_None) {
        Py_XDECREF(key);
        return NULL;
    }
    PyObject *data = PyObject_GetAttr(plans, s_data);
    PyObject *entry = data ? PyDict_GetItemWithError(data, key) : NULL;   /* borrowed */
    Py_XINCREF(entry);
    Py_XDECREF(data);
    Py_DECREF(key);
    return entry;
}

static PyObject *
run_cached(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (argc != 4 || !PyTuple_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "run_cached(comm, method, algorithm, args: tuple)");
        return NULL;
    }
    if (fallback == NULL || active_requests == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll._callkey.init() and init_run() were not both called");
        return NULL;
    }
    PyObject *comm = argv[0], *method = argv[1], *algorithm = argv[2], *args = argv[3];
    PyObject *state = PyObject_GenericGetDict(comm, NULL);
    if (state == NULL)
        return NULL;
    PyObject *tag = PyDict_Check(state) ? draw_tag(comm, state) : NULL;
    if (tag == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "run_cached: the communicator has no instance dictionary");
        Py_DECREF(state);
        return NULL;
    }
    PyObject *entry = cached_entry(comm, state, method, algorithm, args);
    Py_DECREF(state);
    if (entry == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(tag);
            return NULL;
        }
        return tag;   /* a miss: the caller prepares the plan with this tag */
    }
    PyObject *result = NULL;
    if (PyObject_SetAttr(entry, s_used, Py_True) == 0)
        result = PyObject_CallMethodOneArg(entry, s_run, tag);
    Py_DECREF(entry);
    Py_DECREF(tag);
    if (result == NULL)
        return NULL;
    Py_DECREF(result);
    Py_RETURN_NONE;
}

static PyObject *
init_run(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *active, *values;
    if (!PyArg_ParseTuple(args, "O!O!:init_run", &PyList_Type, &active, &PyDict_Type, &values))
        return NULL;
    Py_INCREF(active);
    Py_XSETREF(active_requests, active);
    Py_INCREF(values);
    Py_XSETREF(value_args, values);
    Py_RETURN_NONE;
}

static PyObject *
init(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objects[9];
    if (!PyArg_ParseTuple(args, "OO!O!OO!O!O!OO:init", &objects[0], &PyDict_Type, &objects[1], &PyDict_Type,
                          &objects[2], &objects[3], &PyFrozenSet_Type, &objects[4], &PyDict_Type, &objects[5],
                          &PyDict_Type, &objects[6], &objects[7], &objects[8]))
        return NULL;
    PyObject **slots[9] = {&fallback, &environ_data, &selection_dict, &ndarray_type, &buffer_types,
                           &predefined_types, &predefined_ops, &mpi_op_type, &in_place};
    for (int i = 0; i < 9; i++) {
        Py_INCREF(objects[i]);
        Py_XSETREF(*slots[i], objects[i]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"call_key", (PyCFunction)(void (*)(void))call_key, METH_FASTCALL,
     "call_key(method, args, algorithm, values=())\n--\n\nThe plan cache's key of a blocking call, or None "
     "(as mpicoll.plan._call_key)."},
    {"run_cached", (PyCFunction)(void (*)(void))run_cached, METH_FASTCALL,
     "run_cached(comm, method, algorithm, args)\n--\n\nDraw a blocking call's tag and run its cached plan: None "
     "if it ran, else the tag (as mpicoll.comm._run_cached)."},
    {"init_run", init_run, METH_VARARGS,
     "init_run(active, value_args)\n--\n\nThe objects run_cached reads besides the key's (mpicoll.comm calls it "
     "once)."},
    {"init", init, METH_VARARGS,
     "init(fallback, environ_data, selection_dict, ndarray, buffer_types, predefined_types, predefined_ops, "
     "Op, IN_PLACE)\n--\n\nThe objects the key is built from (mpicoll.plan calls it once)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_callkey", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit__callkey(void)
{
    s_algo = PyBytes_FromString("MPICOLL_ALGO");
    s_debug = PyBytes_FromString("MPICOLL_DEBUG");
    s_gpu = PyBytes_FromString("MPICOLL_GPU_TRANSPORT");
    s_zero = PyBytes_FromString("0");
    s_generation = PyUnicode_InternFromString("_GENERATION");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_typecode = PyUnicode_InternFromString("typecode");
    s_in_place = PyUnicode_InternFromString("IN_PLACE");
    s_b = PyUnicode_InternFromString("B");
    s_array = PyUnicode_InternFromString("array");
    s_tags = PyUnicode_InternFromString("_tags");
    s_plans = PyUnicode_InternFromString("_plans");
    s_timeout = PyUnicode_InternFromString("timeout");
    s_data = PyUnicode_InternFromString("data");
    s_used = PyUnicode_InternFromString("used");
    s_run = PyUnicode_InternFromString("run");
    s_tag_state = PyUnicode_InternFromString("_tag_state");
    empty_tuple = PyTuple_New(0);
    if (!s_algo || !s_debug || !s_gpu || !s_zero || !s_generation || !s_dtype || !s_typecode || !s_in_place || !s_b
        || !s_array || !s_tags || !s_plans || !s_timeout || !s_data || !s_used || !s_run || !s_tag_state
        || !empty_tuple)
        return NULL;
    PyObject *array_module = PyImport_ImportModule("array");
    if (array_module == NULL)
        return NULL;
    array_type = PyObject_GetAttrString(array_module, "array");
    Py_DECREF(array_module);
    if (array_type == NULL)
        return NULL;
    return PyModule_Create(&module);
}
