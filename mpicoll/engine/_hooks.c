/* What mpicoll.engine._direct's executors hand to Python: a blocking round whose messages failed, and a mismatch.
 *
 * on_failure(function) gives C the function a failed round is handed to (mpicoll.engine.standin.continue_marked,
 * as function(bound, comm, tag, round, exc)).
 *
 * on_mismatch(flagged, check) gives C the list of private communicators whose calls were found mismatched
 * (mpicoll.engine.mismatch.FLAGGED, normally empty) and the function that raises the mismatch found on one
 * (check(comm)).  The executors call flagged_on(comm) before each round and after each wait: while the list
 * is empty that is one test of its length.
 */
#include "_direct.h"

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
mismatch_init(void)
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
