/* mpicoll.data._fixedpoint's Gathered and run_planned: a small reproducible Allreduce's hit, compiled.
 *
 * mpicoll.comm.reproducible_allreduce defines both in Python (_Gathered, _run_planned), and makes a Gathered
 * here instead of its own class where this module is built.  A Gathered is the plan of a reproducible
 * Allreduce of one communicator, dtype (float64 or float32) and length whose contributions together take at
 * most GATHER_BYTES: this rank's row (its contribution, then FLAG_BYTES saying whether its arguments failed:
 * 0 here) and the table of every rank's row.  Its run is three steps:
 *   1. the contribution copied into the row (memcpy);
 *   2. the rows gathered: comm.Allgather(row, table) through mpicoll's own blocking call (run_blocking, the
 *      compiled mpicoll.program._callkey.run: a hit of the communicator's plan cache, as the row and table are
 *      the same memory every time);
 *   3. the table summed per column into the result (sum_table: the reproducible sum of p contributions, the
 *      same bits as the two-step path's).
 * A rank whose flag byte is set, or a column that sum_table flags (it cannot round it in double arithmetic),
 * goes to the Python finish(plan, recv, flagged): the error, or fixedpoint.combine's rounding.  fill(send) and
 * sum(recv) are steps 1 and 3 alone: a request's steps around the rounds of its Allgather
 * (mpicoll.comm.reproducible_requests).
 *
 * run_planned(comm, algorithm, reproducible, send, recv, op) is what comm.Allreduce calls in the reproducible
 * mode: it runs the call by its Gathered plan where there is one and the arguments are the usual ones (two
 * C-contiguous NumPy arrays of the plan's dtype and length, the result writable, or MPI.IN_PLACE and the
 * result; op MPI.SUM); every other call
 * goes to the Python definition, which returns False where no plan runs it.
 */
#include "_fixedpoint.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *row, *table;   /* uint8 arrays: this rank's row, then p rows */
    Py_buffer row_view, table_view;   /* held while the plan lives, so that their memory stays where it is */
    Py_ssize_t p, n, nbytes, width;   /* ranks, elements, the contribution's bytes, a row's bytes */
    char kind;               /* 'd' (float64) or 'f' (float32) */
    Format fmt;
    PyObject *params;        /* fixedpoint_kernels.params(fmt) */
} Gathered;

/* init_planned's: mpicoll's blocking call, the Python finish and definition, the classes and values it tests */
static PyObject *run_blocking, *finish, *python_run_planned, *ndarray, *sum_op, *in_place, *state_class, *mode;
static PyObject *s_state, *s_plans, *s_allgather, *s_auto, *kinds[2];

static void
gathered_dealloc(Gathered *self)
{
    if (self->row != NULL)
        PyBuffer_Release(&self->row_view);
    if (self->table != NULL)
        PyBuffer_Release(&self->table_view);
    Py_XDECREF(self->row);
    Py_XDECREF(self->table);
    Py_XDECREF(self->params);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Gathered(row, table, p, kind, n, params) */
static PyObject *
gathered_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *row, *table, *params;
    Py_ssize_t p, n;
    int kind;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        PyErr_SetString(PyExc_TypeError, "Gathered takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOnCnO:Gathered", &row, &table, &p, &kind, &n, &params))
        return NULL;
    Gathered *self = (Gathered *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->p = p;
    self->n = n;
    self->kind = (char)kind;
    self->nbytes = n * (kind == 'd' ? 8 : 4);
    self->params = Py_NewRef(params);
    if (parse_format(params, &self->fmt) < 0)
        goto fail;
    if (PyObject_GetBuffer(row, &self->row_view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto fail;
    self->row = Py_NewRef(row);
    if (PyObject_GetBuffer(table, &self->table_view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto fail;
    self->table = Py_NewRef(table);
    self->width = self->row_view.len;
    if ((kind != 'd' && kind != 'f') || p < 1 || n < 1 || self->width <= self->nbytes
            || self->width % (kind == 'd' ? 8 : 4) || self->table_view.len != p * self->width) {
        PyErr_SetString(PyExc_ValueError, "Gathered: a row of n elements and its flag bytes, a table of p rows");
        goto fail;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* step 3: the gathered table summed into recv (checked by the caller); a rank's flag set, or a column
 * sum_table cannot round, goes to the Python finish */
static int
gathered_sum(Gathered *g, PyObject *recv_object, Py_buffer *recv)
{
    const uint8_t *t = g->table_view.buf;
    Py_ssize_t flagged = 0;
    for (Py_ssize_t r = 0; r < g->p; r++)
        flagged |= t[r * g->width + g->nbytes] != 0;
    if (flagged)
        flagged = -1;
    else
        flagged = sum_table(t, g->kind, g->width / (g->kind == 'd' ? 8 : 4), g->p, g->n, &g->fmt, recv->buf,
                            g->kind, NULL);
    if (flagged == 0)
        return 0;
    PyObject *count = PyLong_FromSsize_t(flagged);
    PyObject *finished = count ? PyObject_CallFunctionObjArgs(finish, (PyObject *)g, recv_object, count, NULL) : NULL;
    Py_XDECREF(count);
    Py_XDECREF(finished);
    return finished == NULL ? -1 : 0;
}

/* the three steps, send and recv checked by the caller: recv = the reproducible sum of every rank's send */
static int
gathered_run(Gathered *g, PyObject *comm, const Py_buffer *send, PyObject *recv_object, Py_buffer *recv)
{
    memcpy(g->row_view.buf, send->buf, (size_t)g->nbytes);
    PyObject *call[5] = {comm, s_allgather, s_auto, g->row, g->table};
    PyObject *done = PyObject_Vectorcall(run_blocking, call, 5, NULL);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return gathered_sum(g, recv_object, recv);
}

/* a buffer of the plan's dtype and length (C-contiguous, writable where asked; _fixedpoint.c's get_buffer):
 * 0, else -1 with an error set (ValueError for another length) */
static int
plan_buffer(Gathered *g, PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    char kind[2] = {g->kind, '\0'}, found;
    if (get_buffer(obj, view, writable, kind, &found, what) < 0)
        return -1;
    Py_ssize_t len = view->len;
    if (len == g->nbytes)
        return 0;
    PyBuffer_Release(view);
    PyErr_Format(PyExc_ValueError, "Gathered: %s holds %zd bytes, the plan's contribution %zd", what, len, g->nbytes);
    return -1;
}

/* Gathered.fill(send): step 1, the contribution copied into this rank's row */
static PyObject *
gathered_fill_method(Gathered *self, PyObject *send)
{
    Py_buffer sv;
    if (plan_buffer(self, send, &sv, 0, "send") < 0)
        return NULL;
    memcpy(self->row_view.buf, sv.buf, (size_t)self->nbytes);
    PyBuffer_Release(&sv);
    Py_RETURN_NONE;
}

/* Gathered.sum(recv): step 3, the gathered table summed into recv */
static PyObject *
gathered_sum_method(Gathered *self, PyObject *recv)
{
    Py_buffer rv;
    if (plan_buffer(self, recv, &rv, 1, "recv") < 0)
        return NULL;
    int done = gathered_sum(self, recv, &rv);
    PyBuffer_Release(&rv);
    if (done < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Gathered.run(comm, send, recv): the definition's plan.run */
static PyObject *
gathered_run_method(Gathered *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "run(comm, send, recv)");
        return NULL;
    }
    Py_buffer sv, rv;
    if (plan_buffer(self, argv[1], &sv, 0, "send") < 0)
        return NULL;
    if (plan_buffer(self, argv[2], &rv, 1, "recv") < 0) {
        PyBuffer_Release(&sv);
        return NULL;
    }
    int done = gathered_run(self, argv[0], &sv, argv[2], &rv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&rv);
    if (done < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* the Gathered plan of the call (a new reference), or NULL (none: no error set, or an error) */
static Gathered *
plan_of(PyObject *comm, PyObject *reproducible, PyObject *send, PyObject *recv, PyObject *op)
{
    int on = reproducible == Py_None ? PyList_GET_ITEM(mode, 0) == Py_True : PyObject_IsTrue(reproducible);
    if (on <= 0 || Py_TYPE(send) != (PyTypeObject *)ndarray || Py_TYPE(recv) != (PyTypeObject *)ndarray
            || op != sum_op)
        return NULL;
    PyObject *state = PyObject_GetAttr(comm, s_state);
    PyObject *plans = state && Py_TYPE(state) == (PyTypeObject *)state_class ? PyObject_GetAttr(state, s_plans) : NULL;
    Py_XDECREF(state);
    if (plans == NULL || !PyDict_CheckExact(plans)) {
        Py_XDECREF(plans);
        return NULL;
    }
    Py_buffer view;    /* the key, (dtype char, length), from send's format and size */
    PyObject *plan = NULL;
    if (PyObject_GetBuffer(send, &view, PyBUF_FORMAT | PyBUF_ND) == 0) {
        const char *f = view.format ? view.format : "B";
        PyObject *kind = strcmp(f, "d") == 0 ? kinds[0] : strcmp(f, "f") == 0 ? kinds[1] : NULL;
        PyObject *n = kind ? PyLong_FromSsize_t(view.len / view.itemsize) : NULL;
        PyObject *key = n ? PyTuple_Pack(2, kind, n) : NULL;
        plan = key ? PyDict_GetItemWithError(plans, key) : NULL;    /* borrowed */
        Py_XINCREF(plan);
        Py_XDECREF(n);
        Py_XDECREF(key);
        PyBuffer_Release(&view);
    } else {
        PyErr_Clear();      /* (not a buffer this path takes: the definition decides) */
    }
    Py_DECREF(plans);
    if (plan != NULL && Py_TYPE(plan) != &GatheredType)
        Py_CLEAR(plan);
    return (Gathered *)plan;
}

/* run_planned(comm, algorithm, reproducible, send, recv, op): True where a plan ran the call (see above) */
PyObject *
run_planned(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (python_run_planned == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mpicoll.data._fixedpoint.init_planned() was not called");
        return NULL;
    }
    if (argc != 6) {
        PyErr_SetString(PyExc_TypeError, "run_planned(comm, algorithm, reproducible, send, recv, op)");
        return NULL;
    }
    PyObject *send = argv[3] == in_place ? argv[4] : argv[3];
    Gathered *plan = plan_of(argv[0], argv[2], send, argv[4], argv[5]);
    Py_buffer sv, rv;
    int usual = plan != NULL && plan_buffer(plan, send, &sv, 0, "send") == 0;
    if (usual && plan_buffer(plan, argv[4], &rv, 1, "recv") < 0) {
        PyBuffer_Release(&sv);
        usual = 0;
    }
    if (!usual) {     /* (a buffer the plan does not take is not an error here: the definition decides) */
        Py_XDECREF(plan);
        if (plan != NULL)
            PyErr_Clear();
        else if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(python_run_planned, argv, 6, NULL);
    }
    int done = gathered_run(plan, argv[0], &sv, argv[4], &rv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&rv);
    Py_DECREF(plan);
    if (done < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* init_planned(run_blocking, finish, definition, ndarray, MPI.SUM, MPI.IN_PLACE, CommState, DEFAULT) */
PyObject *
init_planned(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[8];
    if (!PyArg_ParseTuple(args, "OOOO!OOO!O!:init_planned", &o[0], &o[1], &o[2], &PyType_Type, &o[3], &o[4], &o[5],
                          &PyType_Type, &o[6], &PyList_Type, &o[7]))
        return NULL;
    if (PyList_GET_SIZE(o[7]) != 1) {
        PyErr_SetString(PyExc_ValueError, "init_planned: DEFAULT must be a list of one item");
        return NULL;
    }
    s_state = PyUnicode_InternFromString("_state");
    s_plans = PyUnicode_InternFromString("reproducible_plans");
    s_allgather = PyUnicode_InternFromString("Allgather");
    s_auto = PyUnicode_InternFromString("auto");
    kinds[0] = PyUnicode_InternFromString("d");
    kinds[1] = PyUnicode_InternFromString("f");
    if (!s_state || !s_plans || !s_allgather || !s_auto || !kinds[0] || !kinds[1])
        return NULL;
    PyObject **slots[8] = {&run_blocking, &finish, &python_run_planned, &ndarray, &sum_op, &in_place, &state_class,
                           &mode};
    for (int i = 0; i < 8; i++)
        Py_XSETREF(*slots[i], Py_NewRef(o[i]));
    Py_RETURN_NONE;
}

static PyMethodDef gathered_methods[] = {
    {"run", (PyCFunction)(void (*)(void))gathered_run_method, METH_FASTCALL,
     "run(comm, send, recv): the Allreduce of send into recv by this plan"},
    {"fill", (PyCFunction)gathered_fill_method, METH_O, "fill(send): the contribution copied into this rank's row"},
    {"sum", (PyCFunction)gathered_sum_method, METH_O, "sum(recv): the gathered table summed into recv"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef gathered_members[] = {
    {"row", T_OBJECT, offsetof(Gathered, row), READONLY, "this rank's row: the contribution, then its flag bytes"},
    {"table", T_OBJECT, offsetof(Gathered, table), READONLY, "every rank's row"},
    {"p", T_PYSSIZET, offsetof(Gathered, p), READONLY, "the number of ranks"},
    {"n", T_PYSSIZET, offsetof(Gathered, n), READONLY, "the number of elements"},
    {"params", T_OBJECT, offsetof(Gathered, params), READONLY, "the format, as the kernels take it"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject GatheredType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.data._fixedpoint.Gathered",
    .tp_doc = "Gathered(row, table, p, kind, n, params): a small reproducible Allreduce's plan",
    .tp_basicsize = sizeof(Gathered),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = gathered_new,
    .tp_dealloc = (destructor)gathered_dealloc,
    .tp_methods = gathered_methods,
    .tp_members = gathered_members,
};
