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

/* the key part of a count or counts given by value, appended to key (as plan._value for the forms
   handled here: an int, a list or tuple of ints, an array.array of integers): 0, -2 (error), 1 (fall back) */
static int
append_value(PyObject *key, PyObject *obj)
{
    PyObject *part = NULL;
    if (PyLong_CheckExact(obj)) {
        return PyList_Append(key, obj) < 0 ? -2 : 0;
    }
    if (PyList_CheckExact(obj) || PyTuple_CheckExact(obj)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        PyObject **items = PySequence_Fast_ITEMS(obj);
        part = PyTuple_New(n + 1);
        if (part == NULL)
            return -2;
        Py_INCREF(Py_TYPE(obj));
        PyTuple_SET_ITEM(part, 0, (PyObject *)Py_TYPE(obj));
        for (Py_ssize_t j = 0; j < n; j++) {
            if (!PyLong_CheckExact(items[j])) {
                Py_DECREF(part);
                return 1;
            }
            Py_INCREF(items[j]);
            PyTuple_SET_ITEM(part, j + 1, items[j]);
        }
    }
    else if ((PyObject *)Py_TYPE(obj) == array_type) {   /* ("array", typecode, obj.tobytes()) */
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
            return -2;
        const char *code = view.format;
        int integers = code != NULL && code[0] != 0 && code[1] == 0 && strchr("bBhHiIlLqQ", code[0]) != NULL;
        if (!integers || view.len > 4096 * view.itemsize) {
            PyBuffer_Release(&view);
            return 1;
        }
        PyObject *typecode = PyUnicode_FromString(code);
        PyObject *contents = PyBytes_FromStringAndSize(view.buf, view.len);
        PyBuffer_Release(&view);
        part = typecode && contents ? PyTuple_Pack(3, s_array, typecode, contents) : NULL;
        Py_XDECREF(typecode);
        Py_XDECREF(contents);
        if (part == NULL)
            return -2;
    }
    else {
        return 1;
    }
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
    PyObject *head = Py_BuildValue("(On)", (PyObject *)Py_TYPE(spec), n);
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
    PyObject *values = argc == 4 ? argv[3] : NULL;
    PyObject *empty = NULL;
    if (values == NULL) {
        empty = PyTuple_New(0);
        if (empty == NULL)
            return NULL;
        values = empty;
    }
    PyObject *key = build(argv[0], argv[1], argv[2], values);
    if (key == NULL && PyErr_Occurred()) {   /* as the Python function: no key when an argument misbehaves */
        PyErr_Clear();
        key = FALLBACK;
    }
    if (key == FALLBACK)
        key = PyObject_CallFunctionObjArgs(fallback, argv[0], argv[1], argv[2], values, NULL);
    Py_XDECREF(empty);
    return key;
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
    if (!s_algo || !s_debug || !s_gpu || !s_zero || !s_generation || !s_dtype || !s_typecode || !s_in_place || !s_b
        || !s_array)
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
