/* mpicoll.engine._rounds: the blocking executor's round loop, compiled.
 *
 * The same function as mpicoll.engine.blocking._execute (the pure-Python one,
 * mpicoll.engine.rounds.run with the PLAIN policy, which stays the definition): for each bound round
 * (sends, recvs, steps) it
 * calls comm.Send, comm.Recv or comm.Sendrecv when the round has one message
 * each way at most, hands any other round to the Python ``exchange`` function
 * (every receive posted, then every send, then Waitall), then calls the round's
 * local steps in order.  It calls mpi4py's methods through vectorcall, so a
 * round costs the MPI call and little else; in Python the loop, the tuple
 * unpacking and the method lookups cost about as much as a small message.
 *
 * ``out_call(function, left, right, out)`` is a step of the same kind: a call with
 * no arguments that runs ``function(left, right, out=out)``, as
 * ``functools.partial(function, left, right, out=out)`` does.  A predefined op's
 * reduction is a ufunc that must get ``out`` by keyword (NumPy 2.4 deprecates a
 * third positional argument to np.maximum and np.minimum); a partial with a
 * keyword builds a dict on every call, which costs about as much as the
 * reduction of a small block, where this object hands the keyword to the ufunc's
 * vectorcall as it is.
 *
 * A round whose messages raise (a marked message arriving: see mpicoll.engine.standin) is handed,
 * with its index and the exception, to the function set by ``on_failure``, which raises what the call
 * raises; a correct call never reaches it.
 *
 * The module is optional: when it is not built, mpicoll uses the Python loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>   /* offsetof */
#include "_hooks.h"   /* round_failed (on_failure), flagged_on (on_mismatch) */

static PyObject *exchange;   /* mpicoll.engine.rounds.exchange(sends, recvs, comm, tag) */
static PyObject *s_send, *s_recv, *s_sendrecv;
static PyObject *out_kwnames;  /* ("out",): the keyword names of an out_call's call */

#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#endif

/* out_call: function(left, right, out=out), called with no arguments */
typedef struct {
    PyObject_HEAD
    PyObject *function, *left, *right, *out;
    vectorcallfunc vectorcall;
} OutCall;

static PyObject *
out_call_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)args;
    OutCall *call = (OutCall *)self;
    if (PyVectorcall_NARGS(nargsf) != 0 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "out_call takes no arguments");
        return NULL;
    }
    /* slot 0 is free for the callee (PY_VECTORCALL_ARGUMENTS_OFFSET); the keyword's value follows the positionals */
    PyObject *argv[4] = {NULL, call->left, call->right, call->out};
    return PyObject_Vectorcall(call->function, argv + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, out_kwnames);
}

static PyObject *
out_call_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *function, *left, *right, *out;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "out_call(function, left, right, out) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "out_call", 4, 4, &function, &left, &right, &out))
        return NULL;
    if (!PyCallable_Check(function)) {
        PyErr_SetString(PyExc_TypeError, "out_call: function must be callable");
        return NULL;
    }
    OutCall *call = (OutCall *)type->tp_alloc(type, 0);
    if (call == NULL)
        return NULL;
    Py_INCREF(function);
    Py_INCREF(left);
    Py_INCREF(right);
    Py_INCREF(out);
    call->function = function;
    call->left = left;
    call->right = right;
    call->out = out;
    call->vectorcall = out_call_vectorcall;
    return (PyObject *)call;
}

static int
out_call_traverse(OutCall *call, visitproc visit, void *arg)
{
    Py_VISIT(call->function);
    Py_VISIT(call->left);
    Py_VISIT(call->right);
    Py_VISIT(call->out);
    return 0;
}

static int
out_call_clear(OutCall *call)
{
    Py_CLEAR(call->function);
    Py_CLEAR(call->left);
    Py_CLEAR(call->right);
    Py_CLEAR(call->out);
    return 0;
}

static void
out_call_dealloc(OutCall *call)
{
    PyObject_GC_UnTrack(call);
    out_call_clear(call);
    Py_TYPE(call)->tp_free((PyObject *)call);
}

static PyObject *
out_call_repr(OutCall *call)
{
    return PyUnicode_FromFormat("out_call(%R, left, right, out=...)", call->function);
}

static PyTypeObject OutCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._rounds.out_call",
    .tp_basicsize = sizeof(OutCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "out_call(function, left, right, out)\n--\n\n"
              "A call with no arguments that runs function(left, right, out=out).",
    .tp_new = out_call_new,
    .tp_dealloc = (destructor)out_call_dealloc,
    .tp_traverse = (traverseproc)out_call_traverse,
    .tp_clear = (inquiry)out_call_clear,
    .tp_repr = (reprfunc)out_call_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(OutCall, vectorcall),
};

/* the (buffer, peer) pair at position i of a list of messages, unpacked (borrowed); -1 if it is not a pair */
static int
message(PyObject *messages, Py_ssize_t i, PyObject **buf, PyObject **peer)
{
    PyObject *pair = PyList_GET_ITEM(messages, i);
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "execute: a message is a (buffer, peer) tuple");
        return -1;
    }
    *buf = PyTuple_GET_ITEM(pair, 0);
    *peer = PyTuple_GET_ITEM(pair, 1);
    return 0;
}

/* one round's messages: 0 on success, -1 with an exception set */
static int
transfer(PyObject *comm, PyObject *sends, PyObject *recvs, PyObject *tag)
{
    Py_ssize_t nsends = PyList_GET_SIZE(sends), nrecvs = PyList_GET_SIZE(recvs);
    PyObject *result;
    PyObject *sbuf, *dest, *rbuf, *source;
    if (nsends == 1 && nrecvs <= 1) {
        if (message(sends, 0, &sbuf, &dest) < 0)
            return -1;
        if (nrecvs == 0) {
            PyObject *argv[4] = {comm, sbuf, dest, tag};
            result = PyObject_VectorcallMethod(s_send, argv, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
        else {
            if (message(recvs, 0, &rbuf, &source) < 0)
                return -1;
            PyObject *argv[7] = {comm, sbuf, dest, tag, rbuf, source, tag};
            result = PyObject_VectorcallMethod(s_sendrecv, argv, 7 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
    }
    else if (nsends == 0 && nrecvs == 1) {
        if (message(recvs, 0, &rbuf, &source) < 0)
            return -1;
        PyObject *argv[4] = {comm, rbuf, source, tag};
        result = PyObject_VectorcallMethod(s_recv, argv, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    else if (nsends == 0 && nrecvs == 0) {
        return 0;
    }
    else {
        result = PyObject_CallFunctionObjArgs(exchange, sends, recvs, comm, tag, NULL);
    }
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

/* round r's messages raised: call round_failed(bound, comm, tag, r, exc), which raises (an exception stays set) */
static void
hand_failed_round(PyObject *bound, PyObject *comm, PyObject *tag, Py_ssize_t r)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL && value != NULL)
        PyException_SetTraceback(value, traceback);
    PyObject *index = PyLong_FromSsize_t(r);
    PyObject *result = index == NULL ? NULL
        : PyObject_CallFunctionObjArgs(round_failed, bound, comm, tag, index, value ? value : Py_None, NULL);
    Py_XDECREF(index);
    if (result != NULL) {   /* it returned: the round's own error stands */
        Py_DECREF(result);
        PyErr_Restore(type, value, traceback);
        return;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
}

static PyObject *
execute(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (argc < 2 || argc > 3) {
        PyErr_SetString(PyExc_TypeError, "execute(bound, comm, tag=0)");
        return NULL;
    }
    if (exchange == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.engine._rounds.init() was not called");
        return NULL;
    }
    PyObject *bound = argv[0], *comm = argv[1];
    PyObject *tag = argc == 3 ? argv[2] : NULL;
    if (!PyList_Check(bound)) {
        PyErr_SetString(PyExc_TypeError, "execute: bound rounds are a list");
        return NULL;
    }
    PyObject *zero = NULL;
    if (tag == NULL) {
        tag = zero = PyLong_FromLong(0);
        if (tag == NULL)
            return NULL;
    }
    Py_INCREF(bound);   /* a step could drop the caller's last reference */
    int rc = 0;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(bound) && rc == 0; r++) {
        PyObject *round = PyList_GET_ITEM(bound, r);
        if (!PyTuple_CheckExact(round) || PyTuple_GET_SIZE(round) != 3 || !PyList_Check(PyTuple_GET_ITEM(round, 0))
            || !PyList_Check(PyTuple_GET_ITEM(round, 1)) || !PyList_Check(PyTuple_GET_ITEM(round, 2))) {
            PyErr_SetString(PyExc_TypeError, "execute: a round is a (sends, recvs, steps) tuple of lists");
            rc = -1;
            break;
        }
        if (flagged_on(comm)) {   /* a mismatch found: before each round and after its messages */
            rc = -1;
            break;
        }
        Py_INCREF(round);
        rc = transfer(comm, PyTuple_GET_ITEM(round, 0), PyTuple_GET_ITEM(round, 1), tag);
        if (rc < 0 && round_failed != NULL)
            hand_failed_round(bound, comm, tag, r);
        if (rc == 0 && flagged_on(comm))
            rc = -1;
        PyObject *steps = PyTuple_GET_ITEM(round, 2);
        for (Py_ssize_t s = 0; rc == 0 && s < PyList_GET_SIZE(steps); s++) {
            PyObject *result = PyObject_CallNoArgs(PyList_GET_ITEM(steps, s));
            if (result == NULL)
                rc = -1;
            Py_XDECREF(result);
        }
        Py_DECREF(round);
    }
    Py_DECREF(bound);
    Py_XDECREF(zero);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
init(PyObject *self, PyObject *callable)
{
    (void)self;
    if (!PyCallable_Check(callable)) {
        PyErr_SetString(PyExc_TypeError, "init(exchange): exchange must be callable");
        return NULL;
    }
    Py_INCREF(callable);
    Py_XSETREF(exchange, callable);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"execute", (PyCFunction)(void (*)(void))execute, METH_FASTCALL,
     "execute(bound, comm, tag=0)\n--\n\nRun bound rounds on comm, in order (as mpicoll.engine.blocking._execute)."},
    {"init", init, METH_O,
     "init(exchange)\n--\n\nThe Python function that runs a round of several messages (mpicoll.engine.blocking "
     "calls it once)."},
    HOOK_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rounds", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit__rounds(void)
{
    s_send = PyUnicode_InternFromString("Send");
    s_recv = PyUnicode_InternFromString("Recv");
    s_sendrecv = PyUnicode_InternFromString("Sendrecv");
    out_kwnames = Py_BuildValue("(s)", "out");
    if (!s_send || !s_recv || !s_sendrecv || !out_kwnames || hooks_init() < 0)
        return NULL;
    if (PyType_Ready(&OutCallType) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL)
        return NULL;
    Py_INCREF(&OutCallType);
    if (PyModule_AddObject(mod, "out_call", (PyObject *)&OutCallType) < 0) {
        Py_DECREF(&OutCallType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
