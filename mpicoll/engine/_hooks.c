/* The hooks of the compiled executors (see _hooks.h): linked into mpicoll.engine._direct and
 * mpicoll.engine._rounds, each module holding its own copy of what Python set. */
#include "_hooks.h"

PyObject *round_failed;
PyObject *mismatch_flagged;
static PyObject *mismatch_checker;

PyObject *
on_failure(PyObject *self, PyObject *callable)
{
    (void)self;
    if (!PyCallable_Check(callable)) {
        PyErr_SetString(PyExc_TypeError, "on_failure(function): function must be callable");
        return NULL;
    }
    Py_XSETREF(round_failed, Py_NewRef(callable));
    Py_RETURN_NONE;
}

int
hooks_init(void)
{
    mismatch_flagged = PyList_New(0);
    return mismatch_flagged == NULL ? -1 : 0;
}

PyObject *
on_mismatch(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *flagged, *checker;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &flagged, &checker))
        return NULL;
    Py_XSETREF(mismatch_flagged, Py_NewRef(flagged));
    Py_XSETREF(mismatch_checker, Py_NewRef(checker));
    Py_RETURN_NONE;
}

int
mismatch_check(PyObject *comm)
{
    if (mismatch_checker == NULL)
        return 0;
    PyObject *result = PyObject_CallOneArg(mismatch_checker, comm);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}
