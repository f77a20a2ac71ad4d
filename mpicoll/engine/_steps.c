/* mpicoll.engine._direct's Reduce: a plan's reduction step, out = left (op) right element by element, in C
 * (and its copy step, out = left, as the op COPY).
 *
 * It replaces the NumPy ufunc call of a step (mpicoll.engine.blocking._ufunc_step) where C gives the same
 * bits: + and * of float32 and float64 (one IEEE operation per element either way), and +, *, minimum,
 * maximum and the bitwise ops of the integers (wrapping as NumPy does; computed in 64-bit unsigned
 * arithmetic, which C defines).  Float minimum and maximum stay NumPy's (its NaN and signed-zero rules).
 * NumPy's ufunc call costs a few thousand instructions for a block of a few elements; this one a few dozen,
 * and the C round loops (run_steps in _direct.c) run it without a Python call at all.  Its plain loops are
 * for small blocks: larger ones keep NumPy's vectorized kernels (the caller decides).  Unlike NumPy, it does
 * not warn when a float sum overflows (neither does MPI).
 *
 * Reduce(op, type, out, left, right): op and type are indexes into OPS and TYPES below, which
 * mpicoll.engine.blocking maps from the ufunc's name and the arrays' dtype; the three buffers must be
 * contiguous, of one length, aligned to the element, and out either the same memory as an input or apart
 * from it (ValueError otherwise: the caller keeps the ufunc).  The buffers are held while it lives.
 */
#include "_direct.h"
#include <string.h>

enum { ADD, MULTIPLY, MINIMUM, MAXIMUM, AND, OR, XOR, COPY, NOPS };   /* COPY: out = left (right unused) */
enum { F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, NTYPES };
static const size_t SIZES[NTYPES] = {4, 8, 1, 2, 4, 8, 1, 2, 4, 8};

typedef struct {
    PyObject_HEAD
    int op, type;
    Py_ssize_t n;
    Py_buffer views[3];     /* out, left, right */
} Reduce;

#define FLOAT_LOOP(T, EXPR)                                                                      \
    {                                                                                            \
        T *o = out;                                                                              \
        const T *a = left, *b = right;                                                           \
        for (Py_ssize_t i = 0; i < n; i++)                                                       \
            o[i] = EXPR;                                                                         \
    }
#define INT_LOOP(T)                                                                              \
    {                                                                                            \
        T *o = out;                                                                              \
        const T *a = left, *b = right;                                                           \
        for (Py_ssize_t i = 0; i < n; i++) {                                                     \
            uint64_t x = (uint64_t)a[i], y = (uint64_t)b[i];                                     \
            if (op == MINIMUM)                                                                   \
                o[i] = a[i] < b[i] ? a[i] : b[i];                                                \
            else if (op == MAXIMUM)                                                              \
                o[i] = a[i] < b[i] ? b[i] : a[i];                                                \
            else                                                                                 \
                o[i] = (T)(op == ADD ? x + y : op == MULTIPLY ? x * y : op == AND ? x & y        \
                           : op == OR ? x | y : x ^ y);                                          \
        }                                                                                        \
    }

/* out = left (op) right over n elements of type */
static void
reduce(int op, int type, void *out, const void *left, const void *right, Py_ssize_t n)
{
    if (op == COPY) {
        if (out != left)
            memcpy(out, left, (size_t)n * SIZES[type]);
        return;
    }
    switch (type) {
    case F32: if (op == ADD) FLOAT_LOOP(float, a[i] + b[i]) else FLOAT_LOOP(float, a[i] * b[i]) break;
    case F64: if (op == ADD) FLOAT_LOOP(double, a[i] + b[i]) else FLOAT_LOOP(double, a[i] * b[i]) break;
    case I8: INT_LOOP(int8_t) break;
    case I16: INT_LOOP(int16_t) break;
    case I32: INT_LOOP(int32_t) break;
    case I64: INT_LOOP(int64_t) break;
    case U8: INT_LOOP(uint8_t) break;
    case U16: INT_LOOP(uint16_t) break;
    case U32: INT_LOOP(uint32_t) break;
    case U64: INT_LOOP(uint64_t) break;
    }
}

int
is_reduce_step(PyObject *step)
{
    return Py_TYPE(step) == &ReduceType;
}

void
run_reduce_step(PyObject *step)
{
    Reduce *self = (Reduce *)step;
    reduce(self->op, self->type, self->views[0].buf, self->views[1].buf, self->views[2].buf, self->n);
}

/* whether [a, a + len) and [b, b + len) are the same memory or apart */
static int
same_or_apart(const char *a, const char *b, Py_ssize_t len)
{
    return a == b || a + len <= b || b + len <= a;
}

static PyObject *
reduce_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    int op, kind;
    PyObject *out, *left, *right;
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)
        || !PyArg_ParseTuple(args, "iiOOO:Reduce", &op, &kind, &out, &left, &right))
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "Reduce takes no keyword arguments");
    if (op < 0 || op >= NOPS || kind < 0 || kind >= NTYPES
        || ((kind == F32 || kind == F64) && op > MULTIPLY && op != COPY))
        return PyErr_Format(PyExc_ValueError, "Reduce: no op %d on type %d", op, kind);
    Reduce *self = (Reduce *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->op = op;
    self->type = kind;
    PyObject *objects[3] = {out, left, right};
    for (int k = 0; k < 3; k++)
        if (PyObject_GetBuffer(objects[k], &self->views[k], k == 0 ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE
                                                                    : PyBUF_C_CONTIGUOUS) < 0) {
            for (int j = 0; j < k; j++)
                PyBuffer_Release(&self->views[j]);
            memset(self->views, 0, sizeof self->views);
            Py_DECREF(self);
            return NULL;
        }
    Py_ssize_t len = self->views[0].len;
    size_t size = SIZES[kind];
    const char *o = self->views[0].buf, *a = self->views[1].buf, *b = self->views[2].buf;
    self->n = len / (Py_ssize_t)size;
    if (self->views[1].len != len || self->views[2].len != len || len % (Py_ssize_t)size != 0
        || (uintptr_t)o % size || (uintptr_t)a % size || (uintptr_t)b % size
        || !same_or_apart(o, a, len) || !same_or_apart(o, b, len)) {
        Py_DECREF(self);
        return PyErr_Format(PyExc_ValueError, "Reduce: buffers of unequal lengths, unaligned, or partly overlapping");
    }
    return (PyObject *)self;
}

static void
reduce_dealloc(Reduce *self)
{
    for (int k = 0; k < 3; k++)
        if (self->views[k].obj != NULL)
            PyBuffer_Release(&self->views[k]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
reduce_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "a Reduce step takes no arguments");
        return NULL;
    }
    run_reduce_step(self);
    Py_RETURN_NONE;
}

PyTypeObject ReduceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._direct.Reduce",
    .tp_basicsize = sizeof(Reduce),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reduce(op, type, out, left, right)\n--\n\nA reduction step, out = left (op) right, run by calling it.",
    .tp_new = reduce_new,
    .tp_dealloc = (destructor)reduce_dealloc,
    .tp_call = reduce_call,
};
