/* mpicoll.engine._direct: rounds whose messages C hands to the MPI library's own functions.
 *
 * The other paths call MPI through mpi4py's methods: each message pays a Python call, argument parsing and
 * a buffer export.  Here a plan's messages are bound once to (address, bytes, peer) and posted with
 * MPI_Sendrecv, MPI_Isend, MPI_Startall... found in the MPI library mpi4py loaded (dlopen of its path, so
 * nothing is linked at build time and no MPI header is needed).  Handles differ between the two MPI
 * families (pointers in Open MPI, ints in MPICH), so the calls are compiled once per family
 * (_direct_family.h) and init() picks the running one; mpicoll.engine.direct checks the sizes and the
 * family before it calls init, and uses the mpi4py paths where it cannot.
 *
 * - Rounds(bound, comm, messages, handles=None): a plan's rounds.  Called as rounds(tag), it runs them
 *   blocking (what mpicoll.engine.blocking.execute does: a round's messages, then its local steps).  As a
 *   request (what mpicoll.engine.nonblocking._Collective._advance does): start(tag) posts round 0 with
 *   tag, or start() starts it where handles are a persistent request's MPI persistent requests, and
 *   advance(block) goes on round by round; pending() and drop(handle) let the queue's Waitany see the
 *   current round's requests.
 * - Generalized(address) (in _generalized.c): the MPI generalized request behind an mpicoll request's handle,
 *   started and completed from C (mpi4py's Grequest.Start makes Python callbacks at every start).
 *
 * A round whose messages fail is handed, as in mpicoll.engine._rounds, to the function set by
 * on_failure(function), with an MPI.Exception made from MPI's error code.
 */
#include "_direct.h"
#include <dlfcn.h>
#include <string.h>
#include <structmember.h>

/* an int argument (PyLong_AsInt is Python 3.13's) */
int
as_int(PyObject *value)
{
    long v = PyLong_AsLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "mpicoll.engine._direct: an int is too large");
        return -1;
    }
    return (int)v;
}

Api api;
int ready;
static intptr_t byte;            /* MPI_BYTE */
static void *status_ignore;      /* MPI_STATUS(ES)_IGNORE */
static int err_other, in_status, any_source, any_tag;   /* MPI_ERR_OTHER, MPI_ERR_IN_STATUS, ... */
static Py_ssize_t status_size, source_at, tag_at, error_at;   /* MPI_Status: its size, its public fields */
static PyObject *exception;      /* MPI.Exception */
static PyObject *fromhandle;     /* MPI.Request.fromhandle */
static unsigned long long request_null;   /* MPI_REQUEST_NULL, as mpi4py gives handles */

/* the callbacks of a generalized request: its status is a collective's (empty, with the run's error), and
 * the query returns the error too (Open MPI 5.0's MPI_Waitall without statuses reads only that) */
static int
query(void *state, void *status)
{
    int error = *(int *)state;
    if (status == NULL || status == status_ignore)
        return error;
    char *s = status;
    memset(s, 0, (size_t)status_size);
    *(int *)(s + source_at) = any_source;
    *(int *)(s + tag_at) = any_tag;
    *(int *)(s + error_at) = error;
    return error;
}

static int
free_state(void *state)
{
    (void)state;
    return 0;
}

static int
cancel(void *state, int complete)
{
    (void)state;
    (void)complete;
    return err_other;    /* MPI makes cancelling a collective request erroneous */
}

#define HANDLE void *
#define F(name) ompi_##name
#include "_direct_family.h"
#undef HANDLE
#undef F
#define HANDLE int
#define F(name) mpich_##name
#include "_direct_family.h"
#undef HANDLE
#undef F

/* MPI error code rc as a raised MPI.Exception */
void
raise_mpi(int rc)
{
    PyObject *code = PyLong_FromLong(rc);
    PyObject *exc = code ? PyObject_CallOneArg(exception, code) : NULL;
    Py_XDECREF(code);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

/* run a list of steps: 0, or -1 with the exception set */
int
run_steps(PyObject *steps)
{
    for (Py_ssize_t s = 0; s < PyList_GET_SIZE(steps); s++) {
        PyObject *step = PyList_GET_ITEM(steps, s);
        if (is_reduce_step(step)) {     /* (C's own reduction: no call) */
            run_reduce_step(step);
            continue;
        }
        PyObject *result = PyObject_CallNoArgs(step);
        if (result == NULL)
            return -1;
        Py_DECREF(result);
    }
    return 0;
}

/* -- Rounds --------------------------------------------------------------------------------------- */


static void
rounds_release(Rounds *self)
{
    if (self->rounds != NULL) {
        for (Py_ssize_t t = 0; t < self->nrounds; t++) {
            PyMem_Free(self->rounds[t].messages);
            PyMem_Free(self->rounds[t].requests);
            Py_XDECREF(self->rounds[t].steps);
        }
        PyMem_Free(self->rounds);
        self->rounds = NULL;
    }
}

/* round t's messages from two lists of (address, nbytes, peer) */
static int
bind_messages(Round *r, PyObject *recvs, PyObject *sends)
{
    if (!PyList_Check(recvs) || !PyList_Check(sends)) {
        PyErr_SetString(PyExc_TypeError, "Rounds: a round's messages are two lists (receives, sends)");
        return -1;
    }
    r->nrecvs = (int)PyList_GET_SIZE(recvs);
    r->nsends = (int)PyList_GET_SIZE(sends);
    int n = r->nrecvs + r->nsends;
    r->messages = PyMem_Calloc(n ? n : 1, sizeof(Message));
    r->requests = PyMem_Calloc(n ? n : 1, api.handle_size);
    if (r->messages == NULL || r->requests == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *m = i < r->nrecvs ? PyList_GET_ITEM(recvs, i) : PyList_GET_ITEM(sends, i - r->nrecvs);
        unsigned long long address;
        if (!PyArg_ParseTuple(m, "Kii", &address, &r->messages[i].nbytes, &r->messages[i].peer))
            return -1;
        r->messages[i].address = (void *)(uintptr_t)address;
    }
    return 0;
}

/* round t's requests from a list of MPI handles (ints) */
static int
bind_handles(Round *r, PyObject *handles)
{
    if (!PyList_Check(handles) || PyList_GET_SIZE(handles) != r->nrecvs + r->nsends) {
        PyErr_SetString(PyExc_TypeError, "Rounds: one handle per message of each round");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(handles); i++) {
        /* (mpi4py gives MPICH's int handles as unsigned 64-bit numbers: their low bits are the handle) */
        unsigned long long h = PyLong_AsUnsignedLongLongMask(PyList_GET_ITEM(handles, i));
        if (h == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        if (api.handle_size == sizeof(int))
            ((int *)r->requests)[i] = (int)h;
        else
            ((void **)r->requests)[i] = (void *)(intptr_t)h;
    }
    return 0;
}

static PyObject *rounds_call(PyObject *, PyObject *const *, size_t, PyObject *);

static PyObject *
rounds_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"bound", "comm", "messages", "handles", "keep", "offset", NULL};
    PyObject *bound, *comm, *messages, *handles = Py_None, *keep = Py_None;
    int offset = 0;
    if (!ready) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.engine._direct.init() was not called");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OO!|OOi", names, &PyList_Type, &bound, &comm, &PyList_Type,
                                     &messages, &handles, &keep, &offset))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(bound);
    if (PyList_GET_SIZE(messages) != n || (handles != Py_None && (!PyList_Check(handles)
                                                                  || PyList_GET_SIZE(handles) != n))) {
        PyErr_SetString(PyExc_ValueError, "Rounds: messages (and handles) need one entry per round");
        return NULL;
    }
    Rounds *self = (Rounds *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = rounds_call;
    self->rounds = PyMem_Calloc(n ? n : 1, sizeof(Round));
    if (self->rounds == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->nrounds = n;
    for (Py_ssize_t t = 0; t < n; t++) {
        PyObject *round = PyList_GET_ITEM(bound, t), *pair = PyList_GET_ITEM(messages, t);
        if (!PyTuple_Check(round) || PyTuple_GET_SIZE(round) != 3 || !PyList_Check(PyTuple_GET_ITEM(round, 2))
            || !PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "Rounds: a round is (sends, recvs, steps), its messages (recvs, sends)");
            Py_DECREF(self);
            return NULL;
        }
        Round *r = &self->rounds[t];
        r->steps = Py_NewRef(PyTuple_GET_ITEM(round, 2));
        if (bind_messages(r, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0
            || (handles != Py_None && bind_handles(r, PyList_GET_ITEM(handles, t)) < 0)) {
            Py_DECREF(self);
            return NULL;
        }
    }
    PyObject *handle = PyObject_GetAttrString(comm, "handle");
    unsigned long long value = handle ? PyLong_AsUnsignedLongLongMask(handle) : 0;
    Py_XDECREF(handle);
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    self->comm = (intptr_t)value;
    self->current = n;
    self->tag = -1;
    self->offset = offset;
    self->bound = Py_NewRef(bound);
    self->comm_object = Py_NewRef(comm);
    self->keep = Py_NewRef(keep);
    return (PyObject *)self;
}

/* rounds(tag): run every round blocking (round t's messages, then its steps) */
static PyObject *
rounds_call(PyObject *op, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    Rounds *self = (Rounds *)op;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "rounds(tag)");
        return NULL;
    }
    int tag = as_int(argv[0]);
    if (tag == -1 && PyErr_Occurred())
        return NULL;
    tag += self->offset;
    Py_INCREF(self);    /* a step could drop the caller's last reference */
    PyObject *result = Py_None;
    for (Py_ssize_t t = 0; t < self->nrounds && result != NULL; t++) {
        Round *r = &self->rounds[t];
        int rc;
        if (flagged_on(self->comm_object)) {
            result = NULL;
            break;
        }
        driving(1);
        Py_BEGIN_ALLOW_THREADS
        rc = api.transfer(r, self->comm, tag);
        Py_END_ALLOW_THREADS
        driving(0);
        if (rc != 0) {   /* hand the round to the failure function, which raises or finishes the call */
            raise_mpi(rc);
            PyObject *type, *exc, *traceback;
            PyErr_Fetch(&type, &exc, &traceback);
            PyErr_NormalizeException(&type, &exc, &traceback);
            PyObject *ret = exc ? PyObject_CallFunction(round_failed, "OOinO", self->bound, self->comm_object, tag, t,
                                                         exc) : NULL;
            if (ret != NULL) {
                PyErr_Restore(type, exc, traceback);   /* it returned: the round's own error stands */
            }
            else {
                Py_XDECREF(type);
                Py_XDECREF(exc);
                Py_XDECREF(traceback);
            }
            Py_XDECREF(ret);
            result = NULL;
            break;
        }
        if (flagged_on(self->comm_object) || run_steps(r->steps) < 0)
            result = NULL;
    }
    Py_DECREF(self);
    return Py_XNewRef(result);
}

int
rounds_start_run(Rounds *self, int tag)
{
    self->current = 0;
    self->in_steps = 0;
    self->tag = tag < 0 ? tag : tag + self->offset;
    if (flagged_on(self->comm_object))
        return -1;
    int rc = self->nrounds == 0 ? 0 : tag < 0 ? api.startall(&self->rounds[0])
                                              : api.post(&self->rounds[0], self->comm, self->tag);
    if (rc != 0) {
        raise_mpi(rc);
        return -1;
    }
    return 0;
}

/* start(tag=-1): round 0's messages started (persistent requests), or posted with tag */
static PyObject *
rounds_start(Rounds *self, PyObject *const *argv, Py_ssize_t argc)
{
    int tag = argc > 0 ? as_int(argv[0]) : -1;
    if (argc > 1 || (tag == -1 && PyErr_Occurred()))
        return argc > 1 ? PyErr_Format(PyExc_TypeError, "start(tag=-1)") : NULL;
    return rounds_start_run(self, tag) < 0 ? NULL : Py_NewRef(Py_None);
}

/* the i-th handle of round r, as mpi4py gives handles */
static unsigned long long
handle_at(const Round *r, int i)
{
    if (api.handle_size == sizeof(int))
        return (unsigned long long)(long long)((const int *)r->requests)[i];
    return (unsigned long long)(uintptr_t)((void *const *)r->requests)[i];
}

/* pending(): the current round's active requests, as MPI.Request objects that do not own their handles */
static PyObject *
rounds_pending(Rounds *self, PyObject *unused)
{
    (void)unused;
    PyObject *out = PyList_New(0);
    if (out == NULL || self->current >= self->nrounds)
        return out;
    Round *r = &self->rounds[self->current];
    for (int i = 0; i < r->nrecvs + r->nsends; i++) {
        unsigned long long h = handle_at(r, i);
        if (h == request_null)
            continue;
        PyObject *value = PyLong_FromUnsignedLongLong(h);
        PyObject *request = value ? PyObject_CallOneArg(fromhandle, value) : NULL;
        Py_XDECREF(value);
        if (request == NULL || PyList_Append(out, request) < 0) {
            Py_XDECREF(request);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(request);
    }
    return out;
}

/* drop(handle): MPI completed and freed that request of the current round elsewhere (mpi4py's Waitany on the
 * objects pending() gave): forget it (a persistent request is never freed: nothing to do) */
static PyObject *
rounds_drop(Rounds *self, PyObject *handle)
{
    unsigned long long h = PyLong_AsUnsignedLongLongMask(handle);
    if (h == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (self->tag < 0 || self->current >= self->nrounds)
        Py_RETURN_NONE;
    Round *r = &self->rounds[self->current];
    for (int i = 0; i < r->nrecvs + r->nsends; i++)
        if (handle_at(r, i) == h || (api.handle_size == sizeof(int) && (unsigned)handle_at(r, i) == (unsigned)h)) {
            if (api.handle_size == sizeof(int))
                ((int *)r->requests)[i] = (int)request_null;
            else
                ((void **)r->requests)[i] = (void *)(uintptr_t)request_null;
        }
    Py_RETURN_NONE;
}

/* advance(block): complete round `current` (waiting if block), run its steps, start the next; True when every
 * round is done, False when a round's messages are not complete yet.  An error leaves `current` at its round
 * (in_steps says whether a step raised it, else the round's messages did). */
int
rounds_advance_run(Rounds *self, int block)
{
    while (self->current < self->nrounds) {
        Round *r = &self->rounds[self->current];
        int rc, done = 1;
        if (block) {
            driving(1);
            Py_BEGIN_ALLOW_THREADS
            rc = api.waitall(r);
            Py_END_ALLOW_THREADS
            driving(0);
        }
        else {
            rc = api.testall(r, &done);
        }
        if (rc != 0) {
            self->in_steps = 0;
            raise_mpi(rc);
            return -1;
        }
        if (!done)
            return 0;
        if (flagged_on(self->comm_object)) {
            self->in_steps = 0;
            return -1;
        }
        if (run_steps(r->steps) < 0) {
            self->in_steps = 1;
            return -1;
        }
        if (++self->current < self->nrounds
            && (rc = self->tag < 0 ? api.startall(&self->rounds[self->current])
                                   : api.post(&self->rounds[self->current], self->comm, self->tag)) != 0) {
            self->in_steps = 0;
            raise_mpi(rc);
            return -1;
        }
    }
    return 1;
}

static PyObject *
rounds_advance(Rounds *self, PyObject *block)
{
    int blocking = PyObject_IsTrue(block);
    int done = blocking < 0 ? -1 : rounds_advance_run(self, blocking);
    return done < 0 ? NULL : PyBool_FromLong(done);
}

static int
rounds_traverse(Rounds *self, visitproc visit, void *arg)
{
    Py_VISIT(self->bound);
    Py_VISIT(self->comm_object);
    Py_VISIT(self->keep);
    for (Py_ssize_t t = 0; self->rounds != NULL && t < self->nrounds; t++)
        Py_VISIT(self->rounds[t].steps);
    return 0;
}

static int
rounds_clear(Rounds *self)
{
    Py_CLEAR(self->bound);
    Py_CLEAR(self->comm_object);
    Py_CLEAR(self->keep);
    rounds_release(self);
    return 0;
}

static void
rounds_dealloc(Rounds *self)
{
    PyObject_GC_UnTrack(self);
    rounds_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef rounds_methods[] = {
    {"start", (PyCFunction)(void (*)(void))rounds_start, METH_FASTCALL,
     "start(tag=-1)\n--\n\nStart round 0's persistent requests (tag -1), or post its messages with tag."},
    {"pending", (PyCFunction)rounds_pending, METH_NOARGS,
     "The current round's active requests, as MPI.Request objects that do not own their handles."},
    {"drop", (PyCFunction)rounds_drop, METH_O,
     "drop(handle)\n--\n\nForget a request of the current round that MPI completed elsewhere."},
    {"advance", (PyCFunction)rounds_advance, METH_O,
     "advance(block)\n--\n\nRun rounds while their messages are complete (waiting for them if block); True when "
     "every round is done."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef rounds_members[] = {
    {"current", T_PYSSIZET, offsetof(Rounds, current), READONLY, "the round in flight"},
    {"in_steps", T_INT, offsetof(Rounds, in_steps), READONLY, "whether the last error came from a step"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject RoundsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._direct.Rounds",
    .tp_basicsize = sizeof(Rounds),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Rounds(bound, comm, messages, handles=None, keep=None)\n--\n\n"
              "A plan's rounds, posted by C with the MPI library's functions.",
    .tp_new = rounds_new,
    .tp_dealloc = (destructor)rounds_dealloc,
    .tp_traverse = (traverseproc)rounds_traverse,
    .tp_clear = (inquiry)rounds_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Rounds, vectorcall),
    .tp_methods = rounds_methods,
    .tp_members = rounds_members,
};

/* -- the module ----------------------------------------------------------------------------------- */

/* init(path, family, constants, exception, fromhandle): the MPI library at path (loaded already), its family
 * ("openmpi", "mpich"), its constants (MPI_BYTE's and MPI_REQUEST_NULL's handles, MPI_STATUS_IGNORE's
 * address, ERR_OTHER, ERR_IN_STATUS, ANY_SOURCE, ANY_TAG, the size of MPI_Status and the offsets of MPI_SOURCE, MPI_TAG,
 * MPI_ERROR), MPI.Exception, MPI.Request.fromhandle */
static PyObject *
init(PyObject *self, PyObject *args)
{
    (void)self;
    const char *path, *family;
    unsigned long long byte_handle, ignore;
    PyObject *exc, *from;
    if (!PyArg_ParseTuple(args, "ss(KKKiiiinnnn)OO", &path, &family, &byte_handle, &request_null, &ignore,
                          &err_other, &in_status, &any_source, &any_tag, &status_size, &source_at, &tag_at, &error_at, &exc,
                          &from))
        return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) {
        PyErr_Format(PyExc_ImportError, "mpicoll.engine._direct: %s is not loaded", path);
        return NULL;
    }
    int rc;
    if (strcmp(family, "openmpi") == 0) {
        rc = ompi_resolve(lib);
        ompi_api(&api);
    }
    else if (strcmp(family, "mpich") == 0) {
        rc = mpich_resolve(lib);
        mpich_api(&api);
    }
    else {
        PyErr_Format(PyExc_ImportError, "mpicoll.engine._direct: no calls for the MPI family %s", family);
        return NULL;
    }
    if (rc != 0) {
        PyErr_Format(PyExc_ImportError, "mpicoll.engine._direct: %s lacks an MPI function", path);
        return NULL;
    }
    byte = (intptr_t)byte_handle;
    status_ignore = (void *)(uintptr_t)ignore;
    Py_XSETREF(exception, Py_NewRef(exc));
    Py_XSETREF(fromhandle, Py_NewRef(from));
    ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    HOOK_METHODS,
    {"hook_progress", hook_progress, METH_VARARGS,
     "hook_progress(path, active, elsewhere, advance)\n--\n\nHave Open MPI's progress loop (opal_progress, in the "
     "library at path) call advance() while either list is not empty; whether it could."},
    {"unhook_progress", unhook_progress, METH_NOARGS, "Undo hook_progress."},
    {"hook_age", hook_age, METH_NOARGS,
     "Seconds since the progress hook last advanced the requests (inf: never)."},
    {"init_requests", init_requests, METH_VARARGS,
     "init_requests(persistent, nonblocking, engine, wake, empty, traced, recorder, main_thread, start, wait)"
     "\n--\n\nThe request classes whose Start and Wait methods() makes (see mpicoll.engine.requests)."},
    {"methods", request_methods, METH_O,
     "methods(cls)\n--\n\n(Start, Wait): the C forms of a request class's methods, as method descriptors (see "
     "mpicoll.engine.direct.fast_requests)."},
    {"restart", (PyCFunction)(void (*)(void))fast_restart, METH_FASTCALL,
     "restart(request, tag, keep, seq, recorder)\n--\n\nStart a waited-for nonblocking request again, as new; "
     "False where Python must."},
    {"init", init, METH_VARARGS,
     "init(path, family, constants, exception, fromhandle)\n--\n\nFind the MPI functions in the library at path (see "
     "mpicoll.engine.direct)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_direct", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit__direct(void)
{
    if (PyType_Ready(&RoundsType) < 0 || PyType_Ready(&GeneralizedType) < 0 || PyType_Ready(&ReduceType) < 0
        || PyType_Ready(&GuardType) < 0)
        return NULL;
    PyObject *mod = hooks_init() == 0 ? PyModule_Create(&module) : NULL;
    if (mod == NULL)
        return NULL;
    if (PyModule_AddObjectRef(mod, "Rounds", (PyObject *)&RoundsType) < 0
        || PyModule_AddObjectRef(mod, "Generalized", (PyObject *)&GeneralizedType) < 0
        || PyModule_AddObjectRef(mod, "Reduce", (PyObject *)&ReduceType) < 0
        || PyModule_AddObjectRef(mod, "Guard", (PyObject *)&GuardType) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
