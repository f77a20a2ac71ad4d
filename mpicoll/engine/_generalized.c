/* mpicoll.engine._direct's Generalized: the MPI generalized request behind an mpicoll request's handle,
 * started at each run of the request and completed when the engine finishes it, from C (mpi4py's
 * Grequest.Start would call back into Python at every start).  Its query function (in _direct.c's family
 * code) reads error_class: the status of a request that ended in error carries it.
 */
#include "_direct.h"
#include <string.h>

static PyObject *
generalized_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    unsigned long long address;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "Generalized(address) takes no keyword arguments");
        return NULL;
    }
    if (!ready) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.engine._direct.init() was not called");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "K", &address))
        return NULL;
    Generalized *self = (Generalized *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->address = (char *)(uintptr_t)address;
    return (PyObject *)self;
}

int
generalized_start_run(Generalized *self)
{
    self->error_class = 0;
    int rc = api.grequest_start(&self->error_class, self->handle);
    if (rc != 0) {
        raise_mpi(rc);
        return -1;
    }
    memcpy(self->address, self->handle, api.handle_size);
    return 0;
}

int
generalized_complete_run(Generalized *self, int error_class)
{
    self->error_class = error_class;
    int rc = api.grequest_complete(self->handle);
    if (rc != 0) {
        raise_mpi(rc);
        return -1;
    }
    return 0;
}

static PyObject *
generalized_start(Generalized *self, PyObject *unused)
{
    (void)unused;
    return generalized_start_run(self) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *
generalized_complete(Generalized *self, PyObject *error_class)
{
    int error = as_int(error_class);
    if (error == -1 && PyErr_Occurred())
        return NULL;
    return generalized_complete_run(self, error) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyMethodDef generalized_methods[] = {
    {"start", (PyCFunction)generalized_start, METH_NOARGS,
     "Start a generalized request and make it the mpicoll request's MPI handle."},
    {"complete", (PyCFunction)generalized_complete, METH_O,
     "complete(error_class)\n--\n\nComplete it; its status carries error_class (0: none)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject GeneralizedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._direct.Generalized",
    .tp_basicsize = sizeof(Generalized),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Generalized(address)\n--\n\nThe generalized request behind the MPI handle kept at address.",
    .tp_new = generalized_new,
    .tp_methods = generalized_methods,
};
