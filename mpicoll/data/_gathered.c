/* mpicoll.data._fixedpoint's run_planned and sum_hit: a small reproducible Allreduce's blocking hit, compiled.
 *
 * mpicoll.comm.reproducible_allreduce defines it in Python (_run_planned and run_gathered), and hands this
 * function what it needs once (init_planned).  A small reproducible Allreduce (its contributions together
 * at most GATHER_BYTES) with the usual arguments keeps its stages (mpicoll.comm.reproducible_requests's
 * RequestStages) in its communicator's state, under (dtype char, length); every later such call runs here on
 * them, reading their `hit`: (row, table, n, the format as the kernels take it).  The row is this rank's
 * contribution, then FLAG_BYTES saying whether its arguments failed (0 here); the table is every rank's row.  The run is three steps, as run_gathered's:
 *   1. the contribution copied into the row (memcpy);
 *   2. the rows gathered: comm.Allgather(row, table) through mpicoll's own blocking call (run_blocking, the
 *      compiled mpicoll.program._callkey.run: a hit of the communicator's plan cache, as the row and table are
 *      the same memory every time);
 *   3. the table summed per column into the result (sum_table: the reproducible sum of p contributions, the
 *      same bits as the two-step path's).
 * A rank whose flag byte is set, or a column that sum_table flags (it cannot round it in double arithmetic),
 * goes to the Python sum_table(table, nbytes, recv, flagged): the error, or fixedpoint.combine's rounding.
 *
 * run_planned(comm, algorithm, reproducible, send, recv, op) is what comm.Allreduce calls in the reproducible
 * mode: it runs the call here where stages are kept for it and the arguments are the usual ones (two
 * C-contiguous NumPy arrays of the stages' dtype, float64 or float32, and length, the result writable, or
 * MPI.IN_PLACE and the result; op MPI.SUM); every other call goes to the Python definition, which returns
 * False where nothing kept runs it.  sum_hit(hit, recv) is step 3 alone: a request's last step
 * (mpicoll.comm.reproducible_allreduce.sum_gathered).
 */
#include "_fixedpoint.h"

/* init_planned's: mpicoll's blocking call, the Python sum and definition, the classes and values it tests */
static PyObject *run_blocking, *python_sum, *python_run_planned, *ndarray, *sum_op, *in_place, *state_class, *mode;
static PyObject *s_state, *s_plans, *s_hit, *s_allgather, *s_auto, *kinds[2];

/* what a kept stages' hit tuple says (its objects borrowed from the tuple, which the caller holds) */
typedef struct {
    PyObject *row, *table;
    char *row_buf;
    const uint8_t *table_buf;
    Py_ssize_t width, p, n, nbytes;   /* a row's bytes, ranks, elements, the contribution's bytes */
    char kind;                        /* 'd' (float64) or 'f' (float32) */
    Format fmt;
} Hit;

/* the stages' hit read into *h: 0, else -1 with an error set (a tuple not of the shape above); the last one
 * read is remembered (held, so that the same object is the same tuple, its arrays alive and where they were:
 * a communicator's repeated call reads nothing again) */
static int
read_hit(PyObject *hit, char kind, Hit *h)
{
    static PyObject *last;
    static Hit last_read;
    if (hit == last && kind == last_read.kind) {
        *h = last_read;
        return 0;
    }
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 4) {
        PyErr_SetString(PyExc_TypeError, "run_planned: a kept stages' hit is (row, table, n, format)");
        return -1;
    }
    h->row = PyTuple_GET_ITEM(hit, 0);
    h->table = PyTuple_GET_ITEM(hit, 1);
    h->n = PyLong_AsSsize_t(PyTuple_GET_ITEM(hit, 2));
    if (h->n == -1 && PyErr_Occurred())
        return -1;
    if (parse_format(PyTuple_GET_ITEM(hit, 3), &h->fmt) < 0)
        return -1;
    Py_buffer row, table;     /* (their addresses read once: the tuple keeps the arrays, which do not move) */
    if (PyObject_GetBuffer(h->row, &row, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        return -1;
    if (PyObject_GetBuffer(h->table, &table, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&row);
        return -1;
    }
    h->row_buf = row.buf;
    h->table_buf = table.buf;
    h->width = row.len;
    h->p = row.len > 0 ? table.len / row.len : 0;
    Py_ssize_t table_len = table.len;
    PyBuffer_Release(&row);
    PyBuffer_Release(&table);
    h->kind = kind;
    h->nbytes = h->n * (kind == 'd' ? 8 : 4);
    if (h->p < 1 || h->n < 1 || h->width <= h->nbytes || h->width % (kind == 'd' ? 8 : 4)
            || h->p * h->width != table_len) {
        PyErr_SetString(PyExc_ValueError, "run_planned: a hit's row holds n elements and its flag bytes, its "
                                          "table p rows");
        return -1;
    }
    Py_INCREF(hit);
    Py_XSETREF(last, hit);
    last_read = *h;
    return 0;
}

/* step 3: the gathered table summed into recv (checked by the caller); a rank's flag set, or a column
 * sum_table cannot round, goes to the Python sum */
static int
hit_sum(const Hit *h, PyObject *recv_object, Py_buffer *recv)
{
    const uint8_t *t = h->table_buf;
    int failed = 0;
    for (Py_ssize_t r = 0; r < h->p; r++)
        failed |= t[r * h->width + h->nbytes] != 0;
    if (!failed && sum_table(t, h->kind, h->width / (h->kind == 'd' ? 8 : 4), h->p, h->n, &h->fmt, recv->buf,
                             h->kind, NULL) == 0)
        return 0;
    PyObject *nbytes = PyLong_FromSsize_t(h->nbytes);
    PyObject *summed = nbytes ? PyObject_CallFunctionObjArgs(python_sum, h->table, nbytes, recv_object,
                                                             failed ? Py_True : Py_False, NULL) : NULL;
    Py_XDECREF(nbytes);
    Py_XDECREF(summed);
    return summed == NULL ? -1 : 0;
}

/* a buffer of the hit's dtype and length (C-contiguous, writable where asked; _fixedpoint.c's get_buffer):
 * 0, else -1 with an error set */
static int
hit_buffer(const Hit *h, PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    char kind[2] = {h->kind, '\0'}, found;
    if (get_buffer(obj, view, writable, kind, &found, what) < 0)
        return -1;
    if (view->len == h->nbytes)
        return 0;
    PyBuffer_Release(view);
    PyErr_Format(PyExc_ValueError, "run_planned: %s holds another length than the kept stages'", what);
    return -1;
}

/* the hit tuple of the stages kept for this call (a new reference), its kind in *kind; or NULL (none: no
 * error set, or an error) */
static PyObject *
hit_of(PyObject *comm, PyObject *reproducible, PyObject *send, PyObject *recv, PyObject *op, char *kind)
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
    PyObject *stages = NULL;
    if (PyObject_GetBuffer(send, &view, PyBUF_FORMAT | PyBUF_ND) == 0) {
        const char *f = view.format ? view.format : "B";
        PyObject *k = strcmp(f, "d") == 0 ? kinds[0] : strcmp(f, "f") == 0 ? kinds[1] : NULL;
        PyObject *n = k ? PyLong_FromSsize_t(view.len / view.itemsize) : NULL;
        PyObject *key = n ? PyTuple_Pack(2, k, n) : NULL;
        stages = key ? PyDict_GetItemWithError(plans, key) : NULL;    /* borrowed */
        *kind = f[0];
        Py_XDECREF(n);
        Py_XDECREF(key);
        PyBuffer_Release(&view);
    } else {
        PyErr_Clear();      /* (not a buffer this path takes: the definition decides) */
    }
    PyObject *hit = stages ? PyObject_GetAttr(stages, s_hit) : NULL;
    Py_DECREF(plans);
    if (hit == Py_None)
        Py_CLEAR(hit);
    return hit;
}

/* run_planned(comm, algorithm, reproducible, send, recv, op): True where kept stages ran the call (see above) */
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
    char kind = 0;
    PyObject *hit = hit_of(argv[0], argv[2], send, argv[4], argv[5], &kind);
    if (hit == NULL && PyErr_Occurred())
        return NULL;
    Hit h;
    if (hit != NULL && read_hit(hit, kind, &h) < 0) {
        Py_DECREF(hit);
        return NULL;
    }
    Py_buffer sv, rv;
    int usual = hit != NULL && hit_buffer(&h, send, &sv, 0, "send") == 0;
    if (usual && hit_buffer(&h, argv[4], &rv, 1, "recv") < 0) {
        PyBuffer_Release(&sv);
        usual = 0;
    }
    if (!usual) {     /* (a buffer the stages do not take is not an error here: the definition decides) */
        if (hit != NULL)
            PyErr_Clear();
        Py_XDECREF(hit);
        return PyObject_Vectorcall(python_run_planned, argv, 6, NULL);
    }
    memcpy(h.row_buf, sv.buf, (size_t)h.nbytes);
    PyObject *call[5] = {argv[0], s_allgather, s_auto, h.row, h.table};
    PyObject *done = PyObject_Vectorcall(run_blocking, call, 5, NULL);
    int summed = done == NULL ? -1 : hit_sum(&h, argv[4], &rv);
    Py_XDECREF(done);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&rv);
    Py_DECREF(hit);
    if (summed < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* sum_hit(hit, recv): step 3 alone, a request's last step on kept stages (recv: float64 or float32, C-contiguous,
 * writable, of the hit's length) */
PyObject *
sum_hit(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (argc != 2 || python_sum == NULL) {
        PyErr_SetString(PyExc_TypeError, "sum_hit(hit, recv), after init_planned()");
        return NULL;
    }
    Py_buffer rv;
    char kind;
    if (get_buffer(argv[1], &rv, 1, "df", &kind, "recv") < 0)
        return NULL;
    Hit h;
    int summed = read_hit(argv[0], kind, &h);
    if (summed == 0 && rv.len != h.nbytes) {
        PyErr_SetString(PyExc_ValueError, "sum_hit: recv holds another length than the kept stages'");
        summed = -1;
    }
    if (summed == 0)
        summed = hit_sum(&h, argv[1], &rv);
    PyBuffer_Release(&rv);
    if (summed < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* init_planned(run_blocking, sum_table, definition, ndarray, MPI.SUM, MPI.IN_PLACE, CommState, DEFAULT) */
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
    s_hit = PyUnicode_InternFromString("hit");
    s_allgather = PyUnicode_InternFromString("Allgather");
    s_auto = PyUnicode_InternFromString("auto");
    kinds[0] = PyUnicode_InternFromString("d");
    kinds[1] = PyUnicode_InternFromString("f");
    if (!s_state || !s_plans || !s_hit || !s_allgather || !s_auto || !kinds[0] || !kinds[1])
        return NULL;
    PyObject **slots[8] = {&run_blocking, &python_sum, &python_run_planned, &ndarray, &sum_op, &in_place,
                           &state_class, &mode};
    for (int i = 0; i < 8; i++)
        Py_XSETREF(*slots[i], Py_NewRef(o[i]));
    Py_RETURN_NONE;
}
