/* mpicoll.engine._direct's Guard: the lock of a thread's queue of requests (mpicoll.engine.inflight), which
 * the C engine takes and gives back without calling Python (guard_try, guard_give: _requests.c's Wait and the
 * progress hook's advance), and Python uses as it would threading.Lock (acquire(blocking=True, timeout=-1),
 * release(), locked(), a with block).  A blocking acquire waits with the GIL released and lets a signal's
 * handler run (an exception it raises ends the wait), as threading.Lock's does. */
#include "_direct.h"

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char held;
} Guard;

int
guard_try(PyObject *guard)
{
    Guard *self = (Guard *)guard;
    if (PyThread_acquire_lock(self->lock, NOWAIT_LOCK) != PY_LOCK_ACQUIRED)
        return 0;
    self->held = 1;
    return 1;
}

void
guard_give(PyObject *guard)
{
    Guard *self = (Guard *)guard;
    self->held = 0;
    PyThread_release_lock(self->lock);
}

static PyObject *
guard_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Guard() takes no arguments");
        return NULL;
    }
    Guard *self = (Guard *)type->tp_alloc(type, 0);
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
guard_dealloc(Guard *self)
{
    if (self->lock != NULL) {
        if (self->held)
            PyThread_release_lock(self->lock);   /* (freeing a held lock is undefined on some platforms) */
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* wait for the lock up to microseconds (-1: no limit): 1, 0 (the time passed), -1 (a signal handler raised) */
static int
take(Guard *self, PY_TIMEOUT_T microseconds)
{
    if (guard_try((PyObject *)self))
        return 1;
    if (microseconds == 0)
        return 0;
    long long deadline = microseconds > 0 ? now_ns() / 1000 + microseconds : 0;
    for (;;) {
        PyLockStatus got;
        Py_BEGIN_ALLOW_THREADS
        got = PyThread_acquire_lock_timed(self->lock, microseconds, 1);
        Py_END_ALLOW_THREADS
        if (got == PY_LOCK_ACQUIRED) {
            self->held = 1;
            return 1;
        }
        if (got == PY_LOCK_FAILURE)
            return 0;
        if (Py_MakePendingCalls() < 0)      /* PY_LOCK_INTR: a signal; its handler runs here */
            return -1;
        if (microseconds > 0) {
            microseconds = deadline - now_ns() / 1000;
            if (microseconds <= 0)
                return guard_try((PyObject *)self);
        }
    }
}

static PyObject *
guard_acquire(Guard *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pd:acquire", names, &blocking, &timeout))
        return NULL;
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    if (timeout > (double)PY_TIMEOUT_MAX / 1e6) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    PY_TIMEOUT_T microseconds = !blocking ? 0 : timeout < 0 ? -1 : (PY_TIMEOUT_T)(timeout * 1e6);
    int got = take(self, microseconds);
    return got < 0 ? NULL : PyBool_FromLong(got);
}

static PyObject *
guard_enter(Guard *self, PyObject *unused)
{
    (void)unused;
    return take(self, -1) < 0 ? NULL : Py_NewRef(Py_True);
}

static PyObject *
guard_release(Guard *self, PyObject *unused)
{
    (void)unused;
    if (!self->held) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    guard_give((PyObject *)self);
    Py_RETURN_NONE;
}

static PyObject *
guard_exit(Guard *self, PyObject *unused)
{
    return guard_release(self, unused);
}

static PyObject *
guard_locked(Guard *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(self->held);
}

static PyMethodDef guard_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))guard_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1): take the lock (as threading.Lock.acquire); whether it was taken."},
    {"release", (PyCFunction)guard_release, METH_NOARGS, "release(): give the lock back (RuntimeError if not held)."},
    {"locked", (PyCFunction)guard_locked, METH_NOARGS, "locked(): whether the lock is held."},
    {"__enter__", (PyCFunction)guard_enter, METH_NOARGS, "Take the lock, waiting as long as it takes."},
    {"__exit__", (PyCFunction)guard_exit, METH_VARARGS, "Give the lock back."},
    {NULL},
};

PyTypeObject GuardType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._direct.Guard",
    .tp_doc = "The lock of a thread's queue of requests, which the C engine takes without calling Python "
              "(used as threading.Lock).",
    .tp_basicsize = sizeof(Guard),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = guard_new,
    .tp_dealloc = (destructor)guard_dealloc,
    .tp_methods = guard_methods,
};
