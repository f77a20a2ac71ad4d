/* Objects in and out of fixed-size slots, compiled: mpicoll.calls.objects.codec's put, put_many and load.
 *
 * The definitions, and the slot's format, are in codec.py: an int64 length (the pickle's, or FAILED - rank),
 * then the pickle where it fits in `inline` bytes.  These functions do the same, calling mpi4py's
 * MPI.pickle.dumps and loads as the definitions do; what they save is the interpreter's work around those
 * calls (headers packed, slices made, lists built).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FAILED (-2)      /* mpicoll.calls.objects.slots.FAILED */
#define HEADER 8

static PyObject *pickle;                 /* mpi4py.MPI.pickle */
static PyObject *s_dumps, *s_loads;      /* its method names */

static void write_length(char *at, int64_t length) { memcpy(at, &length, HEADER); }

static int args_ok(Py_ssize_t nargs, Py_ssize_t want, const char *name) {
    if (nargs == want) return 1;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, want, nargs);
    return 0;
}

/* The pickle of obj, or NULL with the error set.  *length: its bytes (a bytes object, or any buffer). */
static PyObject *dumped(PyObject *obj, Py_buffer *data) {
    PyObject *pickled = PyObject_CallMethodOneArg(pickle, s_dumps, obj);
    if (pickled == NULL) return NULL;
    if (PyObject_GetBuffer(pickled, data, PyBUF_SIMPLE) < 0) { Py_DECREF(pickled); return NULL; }
    return pickled;
}

/* An error dumps raised that the caller raises after playing its part (an Exception: not KeyboardInterrupt),
 * taken; NULL with the error left set for any other. */
static PyObject *taken_error(void) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL) PyException_SetTraceback(value, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
}

/* put(buf, obj, rank, inline) -> (pickle, length, None) | (None, FAILED - rank, error) */
static PyObject *put(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!args_ok(nargs, 4, "put")) return NULL;
    Py_ssize_t rank = PyLong_AsSsize_t(args[2]), inline_ = PyLong_AsSsize_t(args[3]);
    if ((rank == -1 || inline_ == -1) && PyErr_Occurred()) return NULL;
    Py_buffer buf, data;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_WRITABLE) < 0) return NULL;
    PyObject *result = NULL;
    if (buf.len < HEADER + (inline_ > 0 ? inline_ : 0)) {
        PyErr_SetString(PyExc_ValueError, "put: the buffer is shorter than a slot");
        goto done;
    }
    PyObject *pickled = dumped(args[1], &data);
    if (pickled == NULL) {
        PyObject *error = taken_error();
        if (error == NULL) goto done;
        write_length(buf.buf, FAILED - rank);
        result = Py_BuildValue("(OnN)", Py_None, (Py_ssize_t)(FAILED - rank), error);
        goto done;
    }
    write_length(buf.buf, data.len);
    if (data.len <= inline_) memcpy((char *)buf.buf + HEADER, data.buf, data.len);
    result = Py_BuildValue("(NnO)", pickled, data.len, Py_None);
    PyBuffer_Release(&data);
done:
    PyBuffer_Release(&buf);
    return result;
}

/* put_many(buf, objects, rank, slot, inline) -> (pickles, longest, None) | ([None]*n, FAILED - rank, error) */
static PyObject *put_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!args_ok(nargs, 5, "put_many")) return NULL;
    Py_ssize_t rank = PyLong_AsSsize_t(args[2]), slot = PyLong_AsSsize_t(args[3]),
               inline_ = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) return NULL;
    PyObject *objects = PySequence_Fast(args[1], "put_many: objects must be a sequence");
    if (objects == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(objects);
    Py_buffer buf, data;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_WRITABLE) < 0) { Py_DECREF(objects); return NULL; }
    PyObject *result = NULL, *pickles = NULL;
    Py_ssize_t longest = -1;
    if (slot < HEADER + inline_ || buf.len < count * slot) {
        PyErr_SetString(PyExc_ValueError, "put_many: the buffer is shorter than its slots");
        goto done;
    }
    pickles = PyList_New(count);
    if (pickles == NULL) goto done;
    char *at = buf.buf;
    for (Py_ssize_t k = 0; k < count; k++, at += slot) {
        PyObject *pickled = dumped(PySequence_Fast_GET_ITEM(objects, k), &data);
        if (pickled == NULL) {
            PyObject *error = taken_error();
            if (error == NULL) goto done;
            for (Py_ssize_t j = 0; j < count; j++) {     /* every slot says so; the list holds Nones */
                write_length((char *)buf.buf + j * slot, FAILED - rank);
                Py_INCREF(Py_None);
                PyList_SetItem(pickles, j, Py_None);     /* (drops the pickle made before, if any) */
            }
            result = Py_BuildValue("(OnN)", pickles, (Py_ssize_t)(FAILED - rank), error);
            goto done;
        }
        write_length(at, data.len);
        if (data.len <= inline_) memcpy(at + HEADER, data.buf, data.len);
        if (data.len > longest) longest = data.len;
        PyBuffer_Release(&data);
        PyList_SET_ITEM(pickles, k, pickled);
    }
    result = Py_BuildValue("(OnO)", pickles, longest, Py_None);
done:
    Py_XDECREF(pickles);
    PyBuffer_Release(&buf);
    Py_DECREF(objects);
    return result;
}

/* load(buf, count, slot, inline) -> the objects of the first count slots, or None where a length is not
 * 0 .. inline (nothing unpickled then) */
static PyObject *load(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!args_ok(nargs, 4, "load")) return NULL;
    Py_ssize_t count = PyLong_AsSsize_t(args[1]), slot = PyLong_AsSsize_t(args[2]),
               inline_ = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    if (count < 0 || slot < HEADER || buf.len < count * slot) {
        PyErr_SetString(PyExc_ValueError, "load: the buffer is shorter than its slots");
        goto done;
    }
    const char *base = buf.buf;
    for (Py_ssize_t k = 0; k < count; k++) {
        int64_t length;
        memcpy(&length, base + k * slot, HEADER);
        if (length < 0 || length > inline_ || length > slot - HEADER) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    PyObject *out = PyList_New(count);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < count; k++) {
        int64_t length;
        memcpy(&length, base + k * slot, HEADER);
        PyObject *data = PyBytes_FromStringAndSize(base + k * slot + HEADER, (Py_ssize_t)length);
        PyObject *obj = data == NULL ? NULL : PyObject_CallMethodOneArg(pickle, s_loads, data);
        Py_XDECREF(data);
        if (obj == NULL) { Py_DECREF(out); goto done; }
        PyList_SET_ITEM(out, k, obj);
    }
    result = out;
done:
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"put", (PyCFunction)(void (*)(void))put, METH_FASTCALL, "put(buf, obj, rank, inline): see codec._put"},
    {"put_many", (PyCFunction)(void (*)(void))put_many, METH_FASTCALL,
     "put_many(buf, objects, rank, slot, inline): see codec._put_many"},
    {"load", (PyCFunction)(void (*)(void))load, METH_FASTCALL, "load(buf, count, slot, inline): see codec._load"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_codec",
                                    "Objects in and out of fixed-size slots (see mpicoll.calls.objects.codec).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__codec(void) {
    PyObject *mpi = PyImport_ImportModule("mpi4py.MPI");
    if (mpi == NULL) return NULL;
    pickle = PyObject_GetAttrString(mpi, "pickle");
    Py_DECREF(mpi);
    s_dumps = PyUnicode_InternFromString("dumps");
    s_loads = PyUnicode_InternFromString("loads");
    if (pickle == NULL || s_dumps == NULL || s_loads == NULL) return NULL;
    return PyModule_Create(&module);
}
