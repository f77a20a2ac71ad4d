/* mpicoll.engine._direct's requests: Start and Wait in their common case, a cached plan's request started
 * again, and the progress hook's advance.
 *
 * The definition is Python's (mpicoll.engine.requests.Prequest.Start and
 * mpicoll.engine.nonblocking._Collective.Wait).  methods(cls) makes the C forms of both, as the method
 * descriptors that replace them on the request classes: each runs a request whose rounds C runs
 * (mpicoll.engine.direct), started (Start: a persistent one) and waited for (Wait: either kind) by the main
 * thread, with no timeout, nothing to run before a start or after the last round, and, for Wait, no other
 * request outstanding; anything else goes to the Python definition, as if C had not been there.  The
 * request's state lives in its slots, which C reads and writes where Python would (their offsets are found
 * once, from the class's member descriptors).
 *
 * Start: the generalized request behind the handle, the state, round 0's Startall, the flight recorder's
 * note (Traced.started, written here as there), and only then the queue's list (so the progress thread never
 * sees a request whose messages have not started), then the progress thread's wake-up.  restart: a nonblocking
 * request that ran before and is inactive again (waited for), given the slots a new one would have (its tag,
 * the call's arguments, its record's number) and started the same way, round 0 posted with Irecv/Isend (what
 * mpicoll.engine.nonblocking._Collective._launch does for a new one).  Wait: the queue's guard (taken
 * without blocking, else Python waits), every round in C, then what _complete and _settle do.
 * advance_main_queue: what Open MPI's progress hook (_progress.c) runs while the main thread's requests are
 * all ones C runs: each advanced without blocking and, when done, completed as _complete does (an MPI wait on
 * its handle then returns, and frees it).
 */
#include "_direct.h"
#include <string.h>
#include <structmember.h>
#include <time.h>

enum { INACTIVE, RUNNING, COMPLETE };   /* mpicoll.engine.nonblocking's request states */

static PyTypeObject *prequest;     /* the persistent request class (start and wait) */
static PyObject *python_start, *python_wait;   /* the definitions: Prequest.Start and _Collective.Wait */
static PyObject *start_doc, *wait_doc;         /* their documentation, with the signature */
static PyMethodDef start_def, wait_def;        /* their C forms (see methods) */
static const char *documented(PyObject **kept, const char *signature, PyObject *function);
static PyTypeObject *request_type; /* the nonblocking request class (wait), whose shared slots lie alike */
static PyObject *main_queue;      /* mpicoll.engine.nonblocking.ACTIVE */
static PyObject *wake;             /* mpicoll.engine.nonblocking._WAKE: what a start calls, if anything */
static PyObject *empty_status;     /* mpicoll.engine.nonblocking._empty(status) */
static unsigned long main_thread;  /* threading.main_thread().ident: the thread whose queue is main_queue */
static PyObject *s_start_failed, *s_advance_failed, *s_started, *s_ended, *s_lent;
static PyTypeObject *traced_type, *recorder_type;   /* mpicoll.engine.recorder's Traced and Recorder */
static Py_ssize_t at_trace_recorder, at_trace_kind, at_trace_seq, at_trace_what, at_trace_starts, at_trace_slot,
    at_recorder_requests, at_recorder_next;
static Py_ssize_t at_state, at_round, at_pending, at_queue, at_error, at_trace, at_generalized, at_direct,
    at_requests, at_finish, at_lent, at_keep, at_watch, at_guard, at_tag, at_before;

#define SLOT(object, at) (*(PyObject **)((char *)(object) + (at)))

static void
set_slot(PyObject *object, Py_ssize_t at, PyObject *value)   /* value: a new reference, stolen */
{
    PyObject *old = SLOT(object, at);
    SLOT(object, at) = value;
    Py_XDECREF(old);
}

static long
state_of(PyObject *request)
{
    PyObject *state = SLOT(request, at_state);
    return state != NULL && PyLong_CheckExact(state) ? PyLong_AsLong(state) : -1;
}

/* the offset of slot `name` of cls, or -1 with an exception set */
static Py_ssize_t
offset_of(PyTypeObject *cls, const char *name)
{
    PyObject *descr = PyObject_GetAttrString((PyObject *)cls, name);
    if (descr == NULL)
        return -1;
    Py_ssize_t offset = -1;
    if (Py_TYPE(descr) == &PyMemberDescr_Type && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX)
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    else
        PyErr_Format(PyExc_TypeError, "init_requests: %s.%s is not a slot", cls->tp_name, name);
    Py_DECREF(descr);
    return offset;
}

PyObject *
init_requests(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *persistent_cls, *request_cls, *queue, *wakes, *empty, *traced_cls, *recorder_cls, *start, *wait;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO!O!kOO", &PyType_Type, &persistent_cls, &PyType_Type, &request_cls,
                          &PyList_Type, &queue, &PyList_Type, &wakes, &empty, &PyType_Type, &traced_cls,
                          &PyType_Type, &recorder_cls, &main_thread, &start, &wait))
        return NULL;
    if ((start_def.ml_doc = documented(&start_doc, "Start($self, /)", start)) == NULL
        || (wait_def.ml_doc = documented(&wait_doc, "Wait($self, /, status=None)", wait)) == NULL)
        return NULL;
    Py_XSETREF(python_start, Py_NewRef(start));
    Py_XSETREF(python_wait, Py_NewRef(wait));
    struct { Py_ssize_t *at; PyObject *cls; const char *name; } notes[] = {
        {&at_trace_recorder, traced_cls, "recorder"}, {&at_trace_kind, traced_cls, "kind"},
        {&at_trace_seq, traced_cls, "seq"}, {&at_trace_what, traced_cls, "what"},
        {&at_trace_starts, traced_cls, "starts"}, {&at_trace_slot, traced_cls, "slot"},
        {&at_recorder_requests, recorder_cls, "requests"}, {&at_recorder_next, recorder_cls, "next_request"},
    };
    for (size_t i = 0; i < sizeof notes / sizeof notes[0]; i++)
        if ((*notes[i].at = offset_of((PyTypeObject *)notes[i].cls, notes[i].name)) < 0)
            return NULL;
    Py_XSETREF(traced_type, (PyTypeObject *)Py_NewRef(traced_cls));
    Py_XSETREF(recorder_type, (PyTypeObject *)Py_NewRef(recorder_cls));
    struct { Py_ssize_t *at; const char *name; } slots[] = {
        {&at_state, "_state"}, {&at_round, "_round"}, {&at_pending, "_pending"}, {&at_queue, "_queue"},
        {&at_error, "_error"}, {&at_trace, "trace"}, {&at_generalized, "_generalized"}, {&at_direct, "_direct"},
        {&at_finish, "_finish"}, {&at_lent, "_lent"}, {&at_keep, "_keep"}, {&at_watch, "watch"},
        {&at_guard, "_guard"}, {&at_tag, "tag"}, {&at_requests, "_requests"}, {&at_before, "_before"},
    };
    size_t shared = sizeof slots / sizeof slots[0] - 2;     /* the last two are the persistent class's own */
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        if ((*slots[i].at = offset_of((PyTypeObject *)persistent_cls, slots[i].name)) < 0)
            return NULL;
        if (i < shared) {   /* both classes keep the request's state at the same places (one base: _Collective) */
            Py_ssize_t other = offset_of((PyTypeObject *)request_cls, slots[i].name);
            if (other < 0)
                return NULL;
            if (other != *slots[i].at)
                return PyErr_Format(PyExc_TypeError, "init_requests: slot %s lies apart in the two classes",
                                    slots[i].name);
        }
    }
    s_start_failed = PyUnicode_InternFromString("_start_failed");
    s_advance_failed = PyUnicode_InternFromString("_advance_failed");
    s_started = PyUnicode_InternFromString("started");
    s_ended = PyUnicode_InternFromString("ended");
    s_lent = PyUnicode_InternFromString("lent");
    if (!s_start_failed || !s_advance_failed || !s_started || !s_ended || !s_lent)
        return NULL;
    Py_XSETREF(prequest, (PyTypeObject *)Py_NewRef(persistent_cls));
    Py_XSETREF(request_type, (PyTypeObject *)Py_NewRef(request_cls));
    Py_XSETREF(main_queue, Py_NewRef(queue));
    Py_XSETREF(wake, Py_NewRef(wakes));
    Py_XSETREF(empty_status, Py_NewRef(empty));
    Py_RETURN_NONE;
}

/* the request's C rounds and generalized request where start and wait apply to it, else 0 */
static int
applies(PyObject *request, Rounds **rounds, Generalized **generalized)
{
    if (prequest == NULL || (Py_TYPE(request) != prequest && Py_TYPE(request) != request_type))
        return 0;
    PyObject *r = SLOT(request, at_direct), *g = SLOT(request, at_generalized);
    if (r == NULL || Py_TYPE(r) != &RoundsType || ((Rounds *)r)->nrounds == 0 || g == NULL
        || Py_TYPE(g) != &GeneralizedType || SLOT(request, at_queue) != main_queue
        || SLOT(request, at_watch) != Py_None)
        return 0;
    *rounds = (Rounds *)r;
    *generalized = (Generalized *)g;
    return 1;
}

/* the cached plan lent to a request given back: plan.lent = False, as _Collective._complete does (0, or -1 with
 * an error set) */
static int
give_back(PyObject *plan)
{
    return PyObject_SetAttr(plan, s_lent, Py_False);
}

/* time.time() */
static PyObject *
now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return PyFloat_FromDouble((double)t.tv_sec + 1e-9 * (double)t.tv_nsec);
}

/* Traced.started(request) and Traced.ended(None, round) (mpicoll.engine.recorder, the definition), written
 * here for a Traced of a Recorder whose fields are as they should be, else called: 0, or -1 with an error */
static int
note_started(PyObject *trace, PyObject *request)
{
    PyObject *recorder = SLOT(trace, at_trace_recorder), *slots, *starts = SLOT(trace, at_trace_starts);
    long i = -1, n = 0;
    if (Py_TYPE(trace) == traced_type && Py_TYPE(recorder) == recorder_type && PyLong_CheckExact(starts)
        && PyList_CheckExact(slots = SLOT(recorder, at_recorder_requests))
        && PyLong_CheckExact(SLOT(recorder, at_recorder_next))) {
        i = PyLong_AsLong(SLOT(recorder, at_recorder_next));
        n = (long)PyList_GET_SIZE(slots);
    }
    PyObject *slot = i >= 0 && n > 0 ? PyList_GET_ITEM(slots, i % n) : NULL;   /* (i counts the starts) */
    if (slot == NULL || !PyList_CheckExact(slot) || PyList_GET_SIZE(slot) != 6) {
        PyObject *result = PyObject_CallMethodOneArg(trace, s_started, request);
        Py_XDECREF(result);
        return result == NULL ? -1 : 0;
    }
    long k = PyLong_AsLong(starts) + 1;
    PyObject *kind = SLOT(trace, at_trace_kind), *seq = SLOT(trace, at_trace_seq);
    PyObject *number = PyLong_FromLong(k), *time_now = now();
    PyObject *numbered = number == NULL ? NULL
                         : PyLong_CheckExact(kind) && PyLong_AsLong(kind) == 1 ? Py_NewRef(seq)
                                                                             : PyTuple_Pack(2, seq, number);
    if (numbered == NULL || time_now == NULL) {
        Py_XDECREF(number);
        Py_XDECREF(numbered);
        Py_XDECREF(time_now);
        return -1;
    }
    set_slot(recorder, at_recorder_next, PyLong_FromLong(i + 1));
    set_slot(trace, at_trace_starts, number);
    set_slot(trace, at_trace_slot, Py_NewRef(slot));
    PyObject *items[6] = {Py_NewRef(kind), numbered, Py_NewRef(SLOT(trace, at_trace_what)), time_now,
                          Py_NewRef(Py_None), Py_NewRef(request)};
    for (int j = 0; j < 6; j++)
        PyList_SetItem(slot, j, items[j]);      /* (steals the reference, drops the old item's) */
    return 0;
}

static int
note_ended(PyObject *trace, PyObject *round)
{
    if (Py_TYPE(trace) != traced_type) {
        PyObject *result = PyObject_CallMethod(trace, "ended", "OO", Py_None, round);
        Py_XDECREF(result);
        return result == NULL ? -1 : 0;
    }
    PyObject *slot = Py_NewRef(SLOT(trace, at_trace_slot));
    set_slot(trace, at_trace_slot, Py_NewRef(Py_None));
    int rc = 0;
    if (PyList_CheckExact(slot) && PyList_GET_SIZE(slot) == 6) {
        PyObject *time_now = now();
        if (time_now == NULL)
            rc = -1;
        else {
            PyList_SetItem(slot, 4, time_now);
            PyList_SetItem(slot, 5, Py_NewRef(Py_None));
        }
    }
    Py_DECREF(slot);
    return rc;
}

/* the start of a run, after the state it starts from was set: the generalized request, the state, round 0's
 * messages, the recorder's note, the queue's list, the wake-up; True, or NULL with an error set */
static PyObject *
launch(PyObject *request, Rounds *rounds, Generalized *generalized, int tag)
{
    if (generalized_start_run(generalized) < 0)
        return NULL;
    set_slot(request, at_state, PyLong_FromLong(RUNNING));
    set_slot(request, at_round, PyLong_FromLong(0));
    if (rounds_start_run(rounds, tag) < 0) {     /* the request ends with the error (Python: _enter, then _fail) */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        PyObject *result = PyObject_CallMethodOneArg(request, s_start_failed, value);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        if (result == NULL)
            return NULL;
        Py_DECREF(result);
        Py_RETURN_TRUE;
    }
    /* its messages are posted: it joins the queue even where the recorder's note fails, so that it completes
     * (and gives its plan back) as any other; the note's error is then the call's */
    PyObject *trace = SLOT(request, at_trace);
    PyObject *type = NULL, *value = NULL, *traceback = NULL;
    int noted = trace != Py_None ? note_started(trace, request) : 0;
    if (noted < 0)
        PyErr_Fetch(&type, &value, &traceback);
    int joined = PyList_Append(main_queue, request);
    if (noted < 0) {
        if (joined == 0)
            PyErr_Restore(type, value, traceback);
        else {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
        }
        return NULL;
    }
    if (joined < 0)
        return NULL;
    if (PyList_GET_SIZE(wake) > 0) {
        PyObject *result = PyObject_CallNoArgs(PyList_GET_ITEM(wake, 0));
        if (result == NULL)
            return NULL;
        Py_DECREF(result);
    }
    Py_RETURN_TRUE;
}

/* Start's C form: True, False where Python must, NULL with an error set */
static PyObject *
start_run(PyObject *request)
{
    Rounds *rounds;
    Generalized *generalized;
    if (!applies(request, &rounds, &generalized) || Py_TYPE(request) != prequest
        || state_of(request) != INACTIVE || SLOT(request, at_before) != Py_None)
        Py_RETURN_FALSE;
    PyObject *requests = SLOT(request, at_requests);
    if (!PyList_Check(requests) || PyList_GET_SIZE(requests) == 0)
        Py_RETURN_FALSE;
    set_slot(request, at_pending, Py_NewRef(PyList_GET_ITEM(requests, 0)));
    return launch(request, rounds, generalized, -1);
}

PyObject *
fast_restart(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (argc != 5) {
        PyErr_SetString(PyExc_TypeError, "restart(request, tag, keep, seq, recorder)");
        return NULL;
    }
    PyObject *request = argv[0], *tag = argv[1], *keep = argv[2], *seq = argv[3], *recorder = argv[4];
    Rounds *rounds;
    Generalized *generalized;
    long state = state_of(request);
    if (!applies(request, &rounds, &generalized) || Py_TYPE(request) != request_type
        || PyThread_get_thread_ident() != main_thread
        || !(state == INACTIVE                  /* waited for by its Wait, or by MPI's (which freed its handle) */
             || (state == COMPLETE && memcmp(generalized->address, generalized->handle, api.handle_size) != 0)))
        Py_RETURN_FALSE;
    PyObject *trace = SLOT(request, at_trace);   /* the record it keeps is the one its communicator keeps now */
    if (recorder == Py_None ? trace != Py_None
                            : Py_TYPE(trace) != traced_type || SLOT(trace, at_trace_recorder) != recorder)
        Py_RETURN_FALSE;
    int number = as_int(tag);
    if (number == -1 && PyErr_Occurred())
        return NULL;
    set_slot(request, at_tag, Py_NewRef(tag));
    set_slot(request, at_keep, Py_NewRef(keep));
    set_slot(request, at_error, Py_NewRef(Py_None));
    if (trace != Py_None) {
        set_slot(trace, at_trace_seq, Py_NewRef(seq));
        set_slot(trace, at_trace_starts, PyLong_FromLong(0));
    }
    PyObject *launched = launch(request, rounds, generalized, number);
    if (launched == NULL && state_of(request) != RUNNING) {
        /* it failed before posting anything (the generalized request): nothing will complete it, so its
         * cached plan, lent to this call, is given back now (the request's release, as a finished run's) */
        PyObject *lent = SLOT(request, at_lent);
        if (lent != Py_None) {
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            if (give_back(lent) < 0)
                PyErr_WriteUnraisable(lent);
            PyErr_Restore(type, value, traceback);
        }
    }
    return launched;
}

/* what _leave and _complete do after the last round: the queue's list left, the recorder told, the
 * generalized request completed (MPI's waits on it may return) */
static int
complete(PyObject *request, Generalized *generalized)
{
    Py_ssize_t n = PyList_GET_SIZE(main_queue);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_GET_ITEM(main_queue, i) == request) {
            if (PyList_SetSlice(main_queue, i, i + 1, NULL) < 0)
                return -1;
            break;
        }
    set_slot(request, at_pending, PyList_New(0));
    PyObject *lent = SLOT(request, at_lent);
    if (lent != Py_None && give_back(lent) < 0)
        return -1;
    set_slot(request, at_keep, Py_NewRef(Py_None));
    PyObject *trace = SLOT(request, at_trace);
    if (trace != Py_None && note_ended(trace, SLOT(request, at_round)) < 0)
        return -1;
    set_slot(request, at_state, PyLong_FromLong(COMPLETE));
    return generalized_complete_run(generalized, 0);
}

/* complete, then what _settle does: the generalized request freed, the status emptied, the request inactive */
static int
finish(PyObject *request, Generalized *generalized, PyObject *status)
{
    if (complete(request, generalized) < 0)
        return -1;
    int rc = api.request_free(generalized->address);
    if (rc != 0) {
        raise_mpi(rc);
        return -1;
    }
    if (status != Py_None) {
        PyObject *result = PyObject_CallOneArg(empty_status, status);
        if (result == NULL)
            return -1;
        Py_DECREF(result);
    }
    set_slot(request, at_state, PyLong_FromLong(INACTIVE));
    return 0;
}

/* round rounds->current of request raised (the error is set): Python ends the request with it, and its Wait
 * raises it (_advance_failed); 0, or -1 with another error set */
static int
advance_failed(PyObject *request, Rounds *rounds)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    set_slot(request, at_round, PyLong_FromSsize_t(rounds->current));
    PyObject *result = PyObject_CallMethodOneArg(request, s_advance_failed, value);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

int
advance_main_queue(void)
{
    if (prequest == NULL)
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(main_queue);
    Rounds *rounds;
    Generalized *generalized;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *request = PyList_GET_ITEM(main_queue, i);
        if (!applies(request, &rounds, &generalized) || state_of(request) != RUNNING
            || SLOT(request, at_finish) != Py_None)
            return 0;
    }
    if (n == 0)
        return 1;
    PyObject *guard = SLOT(PyList_GET_ITEM(main_queue, 0), at_guard);
    if (Py_TYPE(guard) != &GuardType)
        return 0;
    if (!guard_try(guard))
        return 1;       /* (the main thread drives its requests itself) */
    Py_INCREF(guard);   /* (a request completed here may be the last to hold it) */
    int rc = 1;
    PyObject *queue = PyList_GetSlice(main_queue, 0, n);   /* (complete edits the list) */
    for (Py_ssize_t i = 0; queue != NULL && rc == 1 && i < n; i++) {
        PyObject *request = PyList_GET_ITEM(queue, i);
        if (!applies(request, &rounds, &generalized) || state_of(request) != RUNNING)
            continue;       /* (a step of the one before may have ended it) */
        int done = rounds_advance_run(rounds, 0);
        if (done < 0)
            rc = advance_failed(request, rounds) < 0 ? -1 : 1;
        else if (done > 0 && complete(request, generalized) < 0)
            rc = -1;
    }
    if (queue == NULL)
        rc = -1;
    Py_XDECREF(queue);
    guard_give(guard);
    Py_DECREF(guard);
    return rc;
}

/* Wait's C form: True, False where Python must, NULL with an error set */
static PyObject *
wait_run(PyObject *request, PyObject *status)
{
    Rounds *rounds;
    Generalized *generalized;
    if (!applies(request, &rounds, &generalized) || state_of(request) != RUNNING
        || SLOT(request, at_finish) != Py_None
        || PyList_GET_SIZE(main_queue) != 1 || PyList_GET_ITEM(main_queue, 0) != request)
        Py_RETURN_FALSE;
    PyObject *guard = SLOT(request, at_guard);
    if (Py_TYPE(guard) != &GuardType || !guard_try(guard))
        Py_RETURN_FALSE;
    PyObject *outcome = Py_False;
    if (state_of(request) == RUNNING) {      /* (the progress thread may have finished it first) */
        if (rounds_advance_run(rounds, 1) < 0)     /* Python ends the request with the error; its Wait raises */
            outcome = advance_failed(request, rounds) < 0 ? NULL : Py_False;
        else
            outcome = finish(request, generalized, status) < 0 ? NULL : Py_True;
    }
    guard_give(guard);
    return Py_XNewRef(outcome);
}

/* -- the methods ---------------------------------------------------------------------------------- */

static PyObject *
start_method(PyObject *request, PyObject *unused)
{
    (void)unused;
    PyObject *done = start_run(request);
    if (done == Py_False)
        return PyObject_CallOneArg(python_start, request);
    Py_XDECREF(done);
    return done == NULL ? NULL : Py_NewRef(Py_None);
}

static PyObject *
wait_method(PyObject *request, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t given = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *argv[3] = {request, given == 1 ? args[0] : Py_None, given == 2 ? args[1] : NULL};
    int plain = given == 0 || (given == 1 && (nargs == 1
                                              || PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0),
                                                                                  "status") == 0));
    if (plain) {
        PyObject *done = wait_run(request, argv[1]);
        if (done != Py_False)
            return done;
    }
    if (given > 2) {
        PyErr_SetString(PyExc_TypeError, "Wait() takes at most one argument, status");
        return NULL;
    }
    if (plain)
        return PyObject_Vectorcall(python_wait, argv, 2, NULL);
    argv[1] = args[0];     /* (a keyword other than status: the definition says what is wrong) */
    return PyObject_Vectorcall(python_wait, argv, 1 + nargs, kwnames);
}

static PyMethodDef start_def = {"Start", (PyCFunction)start_method, METH_NOARGS, NULL};
static PyMethodDef wait_def = {"Wait", (PyCFunction)(void (*)(void))wait_method, METH_FASTCALL | METH_KEYWORDS,
                               NULL};

/* "signature\n--\n\n" + function.__doc__, kept in *kept; its UTF-8 (NULL with an error set) */
static const char *
documented(PyObject **kept, const char *signature, PyObject *function)
{
    PyObject *doc = PyObject_GetAttrString(function, "__doc__");
    if (doc == NULL)
        return NULL;
    Py_XSETREF(*kept, PyUnicode_FromFormat("%s\n--\n\n%S", signature, doc == Py_None ? Py_None : doc));
    Py_DECREF(doc);
    return *kept != NULL ? PyUnicode_AsUTF8(*kept) : NULL;
}

PyObject *
request_methods(PyObject *self, PyObject *cls)
{
    (void)self;
    if (prequest == NULL || python_start == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.engine._direct.init_requests() was not called");
        return NULL;
    }
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "methods(cls): a request class");
        return NULL;
    }
    PyObject *start = PyDescr_NewMethod((PyTypeObject *)cls, &start_def);
    PyObject *wait = start ? PyDescr_NewMethod((PyTypeObject *)cls, &wait_def) : NULL;
    PyObject *both = wait ? PyTuple_Pack(2, start, wait) : NULL;
    Py_XDECREF(start);
    Py_XDECREF(wait);
    return both;
}
