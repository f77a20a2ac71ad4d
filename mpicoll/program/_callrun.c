/* mpicoll.program._callkey's run and start: a whole blocking call, and a nonblocking call's hit, compiled.
 *
 * run(comm, method, algorithm, *args) does what mpicoll.comm.dispatch.run_blocking (the definition) does:
 * draw the tag, build the key (key_of, in _callkey.c), look the entry up and call its runner, or hand the call
 * to the communicator's slow path.  Every blocking collective method calls it.  The call is noted in the
 * communicator's flight recorder (mpicoll.engine.recorder: begin and end, written here as there; a failure
 * handed to its failed).
 *
 * run_summing(comm, method, algorithm, reproducible, *args) and start_summing(comm, method, args, algorithm,
 * reproducible) are run and start for the summing calls (Allreduce, Reduce, Reduce_scatter(_block), Scan, Exscan):
 * they decide between the plain call and the reproducible sum (mpicoll.comm.summing, whose run_summing and
 * start_summing are their definitions) and run the plain call as run and start do.
 *
 * start(comm, method, args, algorithm) does what mpicoll.comm.dispatch._start (the definition) does for a hit
 * whose cached plan is not lent and whose last request nothing but the plan holds: it draws the tag, builds the
 * key, and has _direct.restart start that request again as new (see mpicoll.engine.requests.start).  Every
 * other call goes to dispatch.start_drawn with the tag drawn here (to _start, before any tag, where the call is
 * not an intracommunicator's or has an exchange of its own).
 */
#include <time.h>

#include "_callkey.h"
#include "structmember.h"

static PyObject *active_requests;   /* mpicoll.engine.nonblocking.ACTIVE: the main thread's unfinished requests */
static PyObject *elsewhere;         /* mpicoll.engine.nonblocking.ELSEWHERE: the other threads' */
static PyObject *value_args;        /* mpicoll.calls.table.VALUE_ARGS: method -> positions of counts given by value */
static PyObject *on_failure;        /* mpicoll.engine.recorder.failed(slot, exc) */
/* start's: the classes of an intracommunicator's state and of a plan, the methods it may run, the Python
 * start, what runs a call once its tag is drawn, _direct.restart, and the nonblocking calls' kind of tag */
static PyObject *state_class, *plan_class, *startable, *python_start, *start_drawn, *restart;
static int nonblocking_kind;
static PyObject *s_request_entries, *s_program, *s_lent, *s_spare;

/* ---- a __slots__ field read without the generic attribute lookup ----
 * The classes a call reads (mpicoll.Comm, CommState, the caches' Entry, the Recorder: READS in _callkey.c)
 * keep their fields in __slots__.  PyObject_GetAttr finds such a field through the type's method cache and
 * the member descriptor on every call (about a sixth of a cached call's own work); a Field remembers, per
 * place it is read, the type it last saw and the field's offset in its instances, and reads the slot.  It
 * answers as PyObject_GetAttr would: it takes the slot only while the type is the one seen, unmodified
 * since (its version tag), with the generic attribute lookup, and the name is a writable object slot there;
 * anything else (another class, a property, a class changed since) goes through PyObject_GetAttr. */
typedef struct {
    PyObject **name;        /* the interned name (one of _callkey.h's s_*) */
    PyTypeObject *type;     /* the type last seen (a strong reference: its address is not reused), or NULL */
    unsigned int version;   /* its version tag then */
    Py_ssize_t offset;      /* the slot's offset in its instances */
} Field;

static Field f_state = {.name = &s_state}, f_tags = {.name = &s_tags}, f_entries = {.name = &s_entries},
             f_slow_path = {.name = &s_slow_path},
             f_recorder = {.name = &s_recorder}, f_calls = {.name = &s_calls}, f_what = {.name = &s_what},
             f_run = {.name = &s_run},
             f_used = {.name = &s_used}, f_request_entries = {.name = &s_request_entries},
             f_program = {.name = &s_program};

/* the offset of field's slot in obj, or -1: read it with the generic lookup */
static Py_ssize_t
slot_offset(Field *field, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type == field->type && type->tp_version_tag == field->version && field->version != 0)
        return field->offset;
    if (type->tp_getattro != PyObject_GenericGetAttr || type->tp_setattro != PyObject_GenericSetAttr)
        return -1;
    PyObject *descriptor = _PyType_Lookup(type, *field->name);   /* borrowed; gives the type a version tag */
    if (descriptor == NULL || Py_TYPE(descriptor) != &PyMemberDescr_Type || type->tp_version_tag == 0)
        return -1;
    PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY))
        return -1;
    Py_XSETREF(field->type, (PyTypeObject *)Py_NewRef(type));
    field->version = type->tp_version_tag;
    field->offset = member->offset;
    return field->offset;
}

/* obj.<field> (a new reference), or NULL with an error set */
static PyObject *
get_field(Field *field, PyObject *obj)
{
    Py_ssize_t offset = slot_offset(field, obj);
    PyObject *value = offset >= 0 ? *(PyObject **)((char *)obj + offset) : NULL;
    return value != NULL ? Py_NewRef(value) : PyObject_GetAttr(obj, *field->name);   /* (unset: its error) */
}

/* obj.<field> = value: 0, or -1 with an error set */
static int
set_field(Field *field, PyObject *obj, PyObject *value)
{
    Py_ssize_t offset = slot_offset(field, obj);
    if (offset < 0)
        return PyObject_SetAttr(obj, *field->name, value);
    PyObject **slot = (PyObject **)((char *)obj + offset);
    Py_XSETREF(*slot, Py_NewRef(value));
    return 0;
}

/* time.time() */
static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* list[i] = item, stealing item (NULL: an error is set, and it fails) */
static int
set_item(PyObject *list, Py_ssize_t i, PyObject *item)
{
    return item == NULL ? -1 : PyList_SetItem(list, i, item);
}

/* recorder.begin(state.recorder, seq, what), inline: the slot of blocking call number in the communicator's
 * recorder, written (a new reference); NULL where the communicator keeps no record, or with an error set.
 * what: the hit's entry.what, else the method's name */
static PyObject *
begin(PyObject *state, PyObject *number, PyObject *entry, PyObject *method)
{
    PyObject *recorder = get_field(&f_recorder, state);
    if (recorder == NULL || recorder == Py_None) {
        Py_XDECREF(recorder);
        return NULL;
    }
    PyObject *calls = get_field(&f_calls, recorder);
    Py_DECREF(recorder);
    if (calls == NULL)
        return NULL;
    long long seq = PyLong_AsLongLong(number);
    Py_ssize_t n = PyList_CheckExact(calls) ? PyList_GET_SIZE(calls) : 0;
    PyObject *slot = n > 0 && seq >= 0 ? PyList_GET_ITEM(calls, (Py_ssize_t)(seq % n)) : NULL;
    if (slot == NULL || !PyList_CheckExact(slot) || PyList_GET_SIZE(slot) != 6) {
        Py_DECREF(calls);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Recorder.calls must be a list of slots [kind, seq, what, start, end, "
                                             "outcome]");
        return NULL;
    }
    Py_INCREF(slot);
    Py_DECREF(calls);
    PyObject *what = entry != NULL ? get_field(&f_what, entry) : NULL;
    if (what == Py_None || (what == NULL && !PyErr_Occurred())) {
        Py_XDECREF(what);
        Py_INCREF(method);
        what = method;
    }
    Py_INCREF(number);
    Py_INCREF(Py_None);
    Py_INCREF(Py_None);
    if (set_item(slot, 1, number) < 0 || set_item(slot, 2, what) < 0 || set_item(slot, 3, PyFloat_FromDouble(now())) < 0
        || set_item(slot, 4, Py_None) < 0 || set_item(slot, 5, Py_None) < 0) {
        Py_DECREF(slot);
        return NULL;
    }
    return slot;
}

/* recorder.end(slot) when result is not NULL, else recorder.failed(slot, the error), the error kept */
static PyObject *
end(PyObject *slot, PyObject *result)
{
    if (result != NULL) {
        if (set_item(slot, 4, PyFloat_FromDouble(now())) < 0)
            Py_CLEAR(result);
        return result;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL && value != NULL)
        PyException_SetTraceback(value, traceback);
    PyObject *noted = value != NULL ? PyObject_CallFunctionObjArgs(on_failure, slot, value, NULL) : NULL;
    if (noted == NULL && value != NULL)
        PyErr_WriteUnraisable(on_failure);   /* the record could not be written: the call's own error goes on */
    Py_XDECREF(noted);
    PyErr_Restore(type, value, traceback);
    return NULL;
}

/* CommState.next_tag(kind), inline: tags[1] = tags[1] % (tags[0] / tags[2] - 1) + 1, the tag kind * tags[0] +
 * tags[1] * tags[2] (a new reference), and in *seq the call's number tags[1] (a new reference) unless seq is
 * NULL; NULL on error */
static PyObject *
draw_tag(PyObject *tags, int kind, PyObject **seq)
{
    if (!PyList_CheckExact(tags) || PyList_GET_SIZE(tags) < 3) {
        PyErr_SetString(PyExc_TypeError, "CommState.tags must be a list of ints");
        return NULL;
    }
    long long per_kind = PyLong_AsLongLong(PyList_GET_ITEM(tags, 0));
    long long last = PyLong_AsLongLong(PyList_GET_ITEM(tags, 1));
    long long sigs = PyLong_AsLongLong(PyList_GET_ITEM(tags, 2));
    if (PyErr_Occurred())
        return NULL;
    if (sigs <= 0 || per_kind / sigs < 2 || last < 0) {
        PyErr_SetString(PyExc_ValueError, "CommState.tags holds a bad tag state");
        return NULL;
    }
    long long n = last % (per_kind / sigs - 1) + 1;
    PyObject *number = PyLong_FromLongLong(n);
    if (number == NULL || PyList_SetItem(tags, 1, Py_NewRef(number)) < 0) {  /* (steals one reference) */
        Py_XDECREF(number);
        return NULL;
    }
    PyObject *tag = PyLong_FromLongLong(kind * per_kind + n * sigs);
    if (seq != NULL && tag != NULL)
        *seq = Py_NewRef(number);
    Py_DECREF(number);
    return tag;
}

/* the entry of key in entries (a new reference), or NULL: none (an error only if one is set) */
static PyObject *
cached_entry(PyObject *entries, PyObject *key)
{
    if (!PyDict_CheckExact(entries) || key == Py_None || PyList_GET_SIZE(active_requests) > 0
        || PyList_GET_SIZE(elsewhere) > 0)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(entries, key);   /* borrowed */
    Py_XINCREF(entry);
    return entry;
}

/* run's body: the call (comm, method, algorithm) with its arguments args[0 .. n) */
static PyObject *
run_call(PyObject *comm, PyObject *method, PyObject *algorithm, PyObject *const *args, Py_ssize_t n)
{
    if (fallback == NULL || active_requests == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.program._callkey.init() and init_run() were not both called");
        return NULL;
    }
    PyObject *state = get_field(&f_state, comm);
    if (state == NULL)
        return NULL;
    if (state == Py_None) {   /* MPI.COMM_NULL: the slow path of no state says so */
        Py_DECREF(state);
        PyErr_SetString(PyExc_ValueError, "the communicator is MPI.COMM_NULL");
        return NULL;
    }
    PyObject *tags = get_field(&f_tags, state);
    PyObject *seq = NULL;
    PyObject *tag = tags ? draw_tag(tags, 0, &seq) : NULL;
    Py_XDECREF(tags);
    PyObject *values = tag ? PyDict_GetItemWithError(value_args, method) : NULL;   /* borrowed */
    PyObject *key = tag && !PyErr_Occurred()
                    ? key_of(method, args, n, NULL, algorithm, values ? values : empty_tuple) : NULL;
    PyObject *entries = key ? get_field(&f_entries, state) : NULL;
    PyObject *entry = entries ? cached_entry(entries, key) : NULL;
    Py_XDECREF(entries);
    PyObject *slot = key != NULL && !PyErr_Occurred() ? begin(state, seq, entry, method) : NULL;
    PyObject *result = NULL;
    if (PyErr_Occurred())
        Py_CLEAR(entry);
    else if (entry != NULL) {
        PyObject *runner = set_field(&f_used, entry, Py_True) == 0 ? get_field(&f_run, entry) : NULL;
        if (runner != NULL) {
            result = PyObject_CallOneArg(runner, tag);
            Py_DECREF(runner);
        }
        Py_DECREF(entry);
    }
    else if (key != NULL) {   /* not cached, or the careful path: the slow path, with the
                                                      tag and key drawn here */
        PyObject *slow = get_field(&f_slow_path, state);
        PyObject *arguments = slow ? tuple_of(args, n) : NULL;
        if (arguments != NULL) {
            PyObject *call[6] = {state, method, algorithm, arguments, tag, key};
            result = PyObject_Vectorcall(slow, call, 6, NULL);
            Py_DECREF(arguments);
        }
        Py_XDECREF(slow);
    }
    if (slot != NULL) {
        result = end(slot, result);
        Py_DECREF(slot);
    }
    Py_XDECREF(key);
    Py_DECREF(state);
    Py_XDECREF(tag);
    Py_XDECREF(seq);
    if (result == NULL)
        return NULL;
    Py_DECREF(result);
    Py_RETURN_NONE;
}

PyObject *
run(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (argc < 3) {
        PyErr_SetString(PyExc_TypeError, "run(comm, method, algorithm, *args)");
        return NULL;
    }
    return run_call(argv[0], argv[1], argv[2], argv + 3, argc - 3);
}

/* ---- the summing calls: plain or reproducible, decided here as mpicoll.comm.summing.wanted decides ---- */
static PyObject *reproducible_default;   /* mpicoll.comm.reproducible_mode.DEFAULT: [MPICOLL_REPRODUCIBLE] */
static PyObject *read_default;           /* mpicoll.comm.reproducible_mode.wanted: reads it where it is unread */
/* the reproducible forms: the gathered Allreduce's cached plan (mpicoll.comm.reproducible_allreduce.run_planned),
 * and mpicoll.comm.reproducible_inter.run and mpicoll.comm.summing.reproducible_start */
static PyObject *planned_allreduce, *summing_run, *summing_start, *s_allreduce;

/* whether a summing call with keyword reproducible runs in the reproducible mode: 1, 0, or -1 (an error).  Its
 * keyword where it is given, else DEFAULT[0], read by wanted(None) while it is not yet a bool */
static int
reproducible_wanted(PyObject *reproducible)
{
    if (reproducible == Py_None) {
        if (PyList_GET_SIZE(reproducible_default) != 1) {
            PyErr_SetString(PyExc_RuntimeError, "the reproducible mode's default is not a list of one item");
            return -1;
        }
        reproducible = PyList_GET_ITEM(reproducible_default, 0);
        if (reproducible != Py_True && reproducible != Py_False) {
            PyObject *read = PyObject_CallOneArg(read_default, Py_None);
            int wanted = read != NULL ? PyObject_IsTrue(read) : -1;
            Py_XDECREF(read);
            return wanted;
        }
    }
    return reproducible == Py_False ? 0 : reproducible == Py_True ? 1 : PyObject_IsTrue(reproducible);
}

/* what run_summing and start_summing decide first: 1 (reproducible), 0 (plain) or -1 (an error set), from the
 * keyword argv[at]; well_formed: the arguments have the function's shape (else a TypeError naming it) */
static int
summing_choice(PyObject *const *argv, int well_formed, Py_ssize_t at, const char *signature)
{
    if (!well_formed) {
        PyErr_SetString(PyExc_TypeError, signature);
        return -1;
    }
    if (summing_run == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.program._callkey.init_summing() was not called");
        return -1;
    }
    return reproducible_wanted(argv[at]);
}

PyObject *
run_summing(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    int wanted = summing_choice(argv, argc >= 4, 3, "run_summing(comm, method, algorithm, reproducible, *args)");
    if (wanted < 0)
        return NULL;
    if (!wanted)
        return run_call(argv[0], argv[1], argv[2], argv + 4, argc - 4);
    if (argc == 7 && (argv[1] == s_allreduce
                      || (PyUnicode_Check(argv[1]) && PyUnicode_Compare(argv[1], s_allreduce) == 0))) {
        /* as summing.reproducible_run: the cached plan's run, if it has one: (comm, algorithm, reproducible, *args) */
        PyObject *call[6] = {argv[0], argv[2], argv[3], argv[4], argv[5], argv[6]};
        PyObject *done = PyObject_Vectorcall(planned_allreduce, call, 6, NULL);
        if (done == NULL)
            return NULL;
        Py_DECREF(done);
        if (done == Py_True)
            Py_RETURN_NONE;
    }
    return PyObject_Vectorcall(summing_run, argv, argc, NULL);
}

PyObject *
start_summing(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    int wanted = summing_choice(argv, argc == 5, 4, "start_summing(comm, method, args, algorithm, reproducible)");
    if (wanted < 0)
        return NULL;
    if (wanted)
        return PyObject_Vectorcall(summing_start, argv, argc, NULL);
    return start(self, argv, 4);
}

PyObject *
init_summing(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *flag, *read, *planned, *running, *starting;
    if (!PyArg_ParseTuple(args, "O!OOOO:init_summing", &PyList_Type, &flag, &read, &planned, &running, &starting))
        return NULL;
    if (s_allreduce == NULL && (s_allreduce = PyUnicode_InternFromString("Allreduce")) == NULL)
        return NULL;
    if (PyList_GET_SIZE(flag) != 1) {
        PyErr_SetString(PyExc_ValueError, "the reproducible mode's default is a list of one item");
        return NULL;
    }
    Py_XSETREF(reproducible_default, Py_NewRef(flag));
    Py_XSETREF(read_default, Py_NewRef(read));
    Py_XSETREF(planned_allreduce, Py_NewRef(planned));
    Py_XSETREF(summing_run, Py_NewRef(running));
    Py_XSETREF(summing_start, Py_NewRef(starting));
    Py_RETURN_NONE;
}

PyObject *
init_run(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *active, *others, *values, *failed;
    if (!PyArg_ParseTuple(args, "O!O!O!O:init_run", &PyList_Type, &active, &PyList_Type, &others, &PyDict_Type,
                          &values, &failed))
        return NULL;
    Py_INCREF(failed);
    Py_XSETREF(on_failure, failed);
    Py_INCREF(active);
    Py_XSETREF(active_requests, active);
    Py_INCREF(others);
    Py_XSETREF(elsewhere, others);
    Py_INCREF(values);
    Py_XSETREF(value_args, values);
    Py_RETURN_NONE;
}


/* the spare request of the cached plan that the nonblocking call of key would be lent (a new reference; its
 * plan in *plan, a new reference too), or NULL: no such request, or something else holds it (an error only if
 * one is set).  The plan is marked lent and its entry used, as mpicoll.comm.dispatch._lend does. */
static PyObject *
spare_of(PyObject *state, PyObject *key, PyObject **plan)
{
    PyObject *data = key != Py_None ? get_field(&f_request_entries, state) : NULL;
    PyObject *hit = data && PyDict_CheckExact(data) ? PyDict_GetItemWithError(data, key) : NULL;   /* borrowed */
    Py_XINCREF(hit);
    Py_XDECREF(data);
    PyObject *found = hit ? get_field(&f_program, hit) : NULL;
    PyObject *lent = found && Py_TYPE(found) == (PyTypeObject *)plan_class ? PyObject_GetAttr(found, s_lent) : NULL;
    PyObject *spare = lent == Py_False ? PyObject_GetAttr(found, s_spare) : NULL;
    Py_XDECREF(lent);
    if (spare != NULL && (spare == Py_None || Py_REFCNT(spare) != 2      /* (the plan's reference and ours) */
                          || set_field(&f_used, hit, Py_True) < 0
                          || PyObject_SetAttr(found, s_lent, Py_True) < 0))
        Py_CLEAR(spare);
    Py_XDECREF(hit);
    if (spare == NULL)
        Py_XDECREF(found);
    else
        *plan = found;
    return spare;
}

PyObject *
start(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (argc != 4) {
        PyErr_SetString(PyExc_TypeError, "start(comm, method, args, algorithm)");
        return NULL;
    }
    if (restart == NULL || fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.program._callkey.init() and init_start() were not both called");
        return NULL;
    }
    PyObject *comm = argv[0], *method = argv[1], *args = argv[2], *algorithm = argv[3];
    PyObject *state = get_field(&f_state, comm);
    if (state == NULL)
        return NULL;
    int runs = Py_TYPE(state) == (PyTypeObject *)state_class && PyTuple_CheckExact(args)
               ? PySet_Contains(startable, method) : 0;
    if (runs <= 0) {     /* an intercommunicator, MPI.COMM_NULL, a call with an exchange of its own */
        Py_DECREF(state);
        return runs < 0 ? NULL : PyObject_Vectorcall(python_start, argv, 4, NULL);
    }
    PyObject *tags = get_field(&f_tags, state), *seq = NULL;
    PyObject *tag = tags ? draw_tag(tags, nonblocking_kind, &seq) : NULL;
    Py_XDECREF(tags);
    PyObject *entries = tag ? get_field(&f_entries, state) : NULL, *key = NULL;
    if (entries != NULL && entries != Py_None) {     /* (None: the careful path) */
        PyObject *values = PyDict_GetItemWithError(value_args, method);     /* borrowed */
        if (!PyErr_Occurred())
            key = key_of(method, ((PyTupleObject *)args)->ob_item, PyTuple_GET_SIZE(args), args, algorithm,
                         values ? values : empty_tuple);
    }
    Py_XDECREF(entries);
    PyObject *plan = NULL, *spare = key ? spare_of(state, key, &plan) : NULL;
    Py_XDECREF(key);
    PyObject *result = NULL;
    if (spare != NULL) {
        PyObject *recorder = get_field(&f_recorder, state);
        PyObject *call[5] = {spare, tag, args, seq, recorder};
        PyObject *started = recorder ? PyObject_Vectorcall(restart, call, 5, NULL) : NULL;
        Py_XDECREF(recorder);
        if (started == Py_True)
            result = Py_NewRef(spare);
        else if (started == Py_False && PyObject_SetAttr(plan, s_lent, Py_False) < 0)
            Py_CLEAR(started);
        Py_XDECREF(started);
        Py_DECREF(spare);
        Py_DECREF(plan);
    }
    if (result == NULL && tag != NULL && !PyErr_Occurred()) {   /* every other call: Python, with the tag drawn */
        PyObject *call[5] = {state, method, args, algorithm, tag};
        result = PyObject_Vectorcall(start_drawn, call, 5, NULL);
    }
    Py_XDECREF(seq);
    Py_XDECREF(tag);
    Py_DECREF(state);
    return result;
}

PyObject *
init_start(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *states, *plans, *methods, *slow, *drawn, *restarting;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOi:init_start", &PyType_Type, &states, &PyType_Type, &plans,
                          &PyFrozenSet_Type, &methods, &slow, &drawn, &restarting, &nonblocking_kind))
        return NULL;
    s_request_entries = PyUnicode_InternFromString("request_entries");
    s_program = PyUnicode_InternFromString("program");
    s_lent = PyUnicode_InternFromString("lent");
    s_spare = PyUnicode_InternFromString("spare");
    if (!s_request_entries || !s_program || !s_lent || !s_spare)
        return NULL;
    Py_XSETREF(state_class, Py_NewRef(states));
    Py_XSETREF(plan_class, Py_NewRef(plans));
    Py_XSETREF(startable, Py_NewRef(methods));
    Py_XSETREF(python_start, Py_NewRef(slow));
    Py_XSETREF(start_drawn, Py_NewRef(drawn));
    Py_XSETREF(restart, Py_NewRef(restarting));
    Py_RETURN_NONE;
}
