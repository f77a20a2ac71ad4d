/* mpicoll.data._fixedpoint: the local passes of the reproducible sums, compiled.
 *
 * The same functions as mpicoll.data.fixedpoint (the NumPy definitions, which stay the reference and
 * run where this module is not built, or with MPICOLL_NO_EXTENSIONS=1): each element's window code
 * (fixedpoint.codes), its limbs in the agreed window (fixedpoint.encode), the summed limbs rounded back
 * once (fixedpoint.decode), and a small table of contributions summed in one pass (fixedpoint.sum_rows).
 * NumPy runs each of these as 10 to 40 passes over the data, with a temporary array each; here each is
 * one loop whose per-element work is a few integer and floating-point operations in registers.
 *
 * The arithmetic is the NumPy definitions', element by element:
 * - a code is the float's exponent field clamped to [floor, ceiling], less floor, rounded up to a
 *   multiple of step, plus FINITE0; NAN or INF where the exponent field is all ones, NEG_ZERO for -0.0;
 * - a window top is (code - FINITE0) * step + floor (NEG_ZERO: the lowest window, INF and NAN: the highest);
 * - limb k of x is read from the bits of x + M_k, with M_k = 1.5 * 2**(top - 44*(k+1) + 52): the addition
 *   rounds to nearest (ties to even) once, the remainder x - (x + M_k - M_k) is exact; a top above
 *   HIGHEST first scales x and top down by 2**64 (exact at the window's unit);
 * - decoding scales each limb (exactly a double while below 2**53) by its unit and adds them in one
 *   double addition (one rounding; the cast to float32 is the only other one).  An element whose limbs
 *   are not all below 2**53 (only possible with 512 terms or more), or whose double sum overflows in a
 *   window above HIGHEST, is *flagged*: the caller rounds it with fixedpoint.combine, in integers.
 *
 * The compiler must not contract or reassociate floating-point operations (no -ffast-math): the
 * magic-number extraction relies on each addition being rounded as written, which C guarantees for
 * double on every platform whose FLT_EVAL_METHOD is 0 (checked below).
 *
 * Arrays arrive through the buffer protocol, C-contiguous, with their element type checked by format
 * character ('d' double, 'f' float, 'b' int8, 'q'/'l' int64, 'B' uint8): a wrong one raises TypeError.
 */
#include "_fixedpoint.h"

static Tables tables[8];   /* one per format seen (four dtypes): filled with the GIL held, then only read */

static void
fill_tables(Tables *t, const Format *fmt)
{
    for (int field = 0; field < 2048; field++)
        t->code64[field] = (int8_t)code_from(field - 1022, 0, 0, fmt);
    for (int field = 0; field < 256; field++)
        t->code32[field] = (int8_t)code_from(field - 126, 0, 0, fmt);
    for (int code = NEG_ZERO; code <= NAN_CODE; code++) {
        int i = code + 128, top = top_of(code, fmt), high = top > HIGHEST;
        t->prescale[i] = high ? 0x1p-64 : 1.0;
        t->magic[i] = ((uint64_t)(top - (high ? 64 : 0) + (1023 + 52 - LIMB_BITS)) << 52) | (UINT64_C(1) << 51);
        for (int k = 0; k < MAX_LIMBS; k++) {
            int e = top - (k + 1) * LIMB_BITS;
            t->unit[k][i] = e < -1074 ? 0.0 : pow2(e);   /* (below the floor: a second limb the format lacks) */
        }
        t->high[i] = (uint8_t)high;
    }
}

static int parse_new_format(PyObject *tuple, Format *fmt);

/* fmt from the kernels' format tuple (floor, ceiling, step, emax, limbs), its tables found or filled */
int
parse_format(PyObject *tuple, Format *fmt)
{
    /* the last tuple parsed (held, so that the same object is the same tuple) and its format: the callers
     * pass fixedpoint_kernels.params's cached tuple every time */
    static PyObject *last;
    static Format last_format;
    if (tuple == last) {
        *fmt = last_format;
        return 0;
    }
    if (parse_new_format(tuple, fmt) < 0)
        return -1;
    Py_INCREF(tuple);
    Py_XSETREF(last, tuple);
    last_format = *fmt;
    return 0;
}

static int
parse_new_format(PyObject *tuple, Format *fmt)
{
    if (!PyArg_ParseTuple(tuple, "iiiii", &fmt->floor, &fmt->ceiling, &fmt->step, &fmt->emax, &fmt->limbs))
        return -1;
    if (fmt->limbs < 1 || fmt->limbs > MAX_LIMBS || fmt->step < 1 || (fmt->step & (fmt->step - 1))
            || fmt->ceiling < fmt->floor) {
        PyErr_SetString(PyExc_ValueError, "format: 1 or 2 limbs, a power-of-two step, ceiling >= floor");
        return -1;
    }
    for (fmt->shift = 0; (1 << fmt->shift) < fmt->step; fmt->shift++)
        ;
    fmt->highest_code = ((fmt->ceiling - fmt->floor + fmt->step - 1) >> fmt->shift) + FINITE0;
    /* every window's code is below INF_CODE, its limb 0's unit and magic number are doubles */
    if (fmt->highest_code >= INF_CODE || fmt->floor < -1030 || top_of(NAN_CODE, fmt) - LIMB_BITS > 1023) {
        PyErr_SetString(PyExc_ValueError, "format: its windows are not all named by a code and held in doubles");
        return -1;
    }
    int key[5] = {fmt->floor, fmt->ceiling, fmt->step, fmt->emax, fmt->limbs};
    for (size_t j = 0; j < sizeof tables / sizeof *tables; j++) {
        Tables *t = &tables[j];
        if (t->key[4] == 0) {
            fill_tables(t, fmt);
            memcpy(t->key, key, sizeof key);
        }
        if (memcmp(t->key, key, sizeof key) == 0) {
            fmt->t = t;
            return 0;
        }
    }
    PyErr_SetString(PyExc_ValueError, "format: more than 8 formats");
    return -1;
}


/* -- the buffers ---------------------------------------------------------------------------------- */

/* a C-contiguous buffer of `what` whose format is one of `formats` (the format found in *found) */
int
get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *formats, char *found, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (f[0] == '\0' || f[1] != '\0' || strchr(formats, f[0]) == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: a buffer of format %s expected, not %s", what, formats, view->format);
        PyBuffer_Release(view);
        return -1;
    }
    *found = f[0] == 'l' ? 'q' : f[0];
    return 0;
}

static Py_ssize_t
items(const Py_buffer *view)
{
    return view->len / view->itemsize;
}

/* codes(x, out, fmt): out[i] = the code of x[i] (x: float64 or float32; out: int8 of the same length) */
static PyObject *
codes(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *oo, *fo;
    Format fmt;
    if (!PyArg_ParseTuple(args, "OOO", &xo, &oo, &fo) || parse_format(fo, &fmt) < 0)
        return NULL;
    Py_buffer x, out;
    char xf, of;
    if (get_buffer(xo, &x, 0, "df", &xf, "x") < 0)
        return NULL;
    if (get_buffer(oo, &out, 1, "b", &of, "out") < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    Py_ssize_t n = items(&x);
    if (items(&out) != n) {
        PyErr_SetString(PyExc_ValueError, "codes: out must have one int8 per element of x");
    } else {
        int8_t *o = out.buf;
        const Format f = fmt;   /* a copy whose address never escapes: its fields stay in registers */
        KERNEL_BEGIN(n)
        if (xf == 'd') {
            const double *v = x.buf;
            for (Py_ssize_t i = 0; i < n; i++)
                o[i] = (int8_t)code_of_double(v[i], &f);
        } else {
            const float *v = x.buf;
            for (Py_ssize_t i = 0; i < n; i++)
                o[i] = (int8_t)code_of_float(v[i], &f);
        }
        KERNEL_END
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* encode(x, code, out, fmt, inline): out (n rows of fmt.limbs int64, one more column for the counts of
 * +inf, -inf and NaN) gets x's limbs in the agreed windows `code`; with `inline` (no such column: a sum of
 * every term), an element whose code is INF or NAN gets its counts in limb 0 and zeros after it */
static PyObject *
encode(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *co, *oo, *fo;
    int inline_counts;
    Format fmt;
    if (!PyArg_ParseTuple(args, "OOOOp", &xo, &co, &oo, &fo, &inline_counts) || parse_format(fo, &fmt) < 0)
        return NULL;
    Py_buffer x, code, out;
    char xf, cf, of;
    if (get_buffer(xo, &x, 0, "df", &xf, "x") < 0)
        return NULL;
    if (get_buffer(co, &code, 0, "b", &cf, "code") < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    if (get_buffer(oo, &out, 1, "ql", &of, "out") < 0) {
        PyBuffer_Release(&x);
        PyBuffer_Release(&code);
        return NULL;
    }
    Py_ssize_t n = items(&x);
    Py_ssize_t cols = n ? items(&out) / n : fmt.limbs;
    if (items(&code) != n || items(&out) != n * cols || (cols != fmt.limbs && cols != fmt.limbs + 1)) {
        PyErr_SetString(PyExc_ValueError, "encode: code needs one int8 per element, out limbs (and a tally) each");
    } else {
        const int8_t *c = code.buf;
        int64_t *o = out.buf;
        const Format f = fmt;
        int tally = cols > f.limbs;
        KERNEL_BEGIN(n * cols)
        /* one loop per element type and limb count, each with its constants folded in */
#define ENCODE(T, L) for (Py_ssize_t i = 0; i < n; i++) \
            encode_one((double)((const T *)x.buf)[i], c[i], &f, L, tally, 0, o + i * cols)
        if (inline_counts && !tally) {
            for (Py_ssize_t i = 0; i < n; i++) {
                int64_t acc[MAX_LIMBS + 1] = {0};
                double v = xf == 'd' ? ((const double *)x.buf)[i] : (double)((const float *)x.buf)[i];
                int special = c[i] >= INF_CODE;
                encode_one(v, c[i], &f, f.limbs, 1, 0, acc);
                for (int k = 0; k < f.limbs; k++)
                    o[i * cols + k] = special ? (k == 0 ? acc[f.limbs] : 0) : acc[k];
            }
        } else if (xf == 'd' && f.limbs == 2)
            ENCODE(double, 2);
        else if (xf == 'd')
            ENCODE(double, 1);
        else if (f.limbs == 2)
            ENCODE(float, 2);
        else
            ENCODE(float, 1);
#undef ENCODE
        KERNEL_END
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&code);
    PyBuffer_Release(&out);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* decode(summed, code, out, fmt, check, flags): out[i] (float64 or float32) = the sum of summed's row i
 * rounded once; flags (uint8) gets 1 for each row that needs fixedpoint.combine (its out[i] is to be
 * overwritten), 0 for the others; returns how many.  check: whether limbs may reach 2**53 (512 terms or
 * more). */
static PyObject *
decode(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *so, *co, *oo, *fo, *flo;
    int check;
    Format fmt;
    if (!PyArg_ParseTuple(args, "OOOOpO", &so, &co, &oo, &fo, &check, &flo) || parse_format(fo, &fmt) < 0)
        return NULL;
    Py_buffer summed, code, out, flags;
    char sf, cf, of, ff;
    if (get_buffer(so, &summed, 0, "ql", &sf, "summed") < 0)
        return NULL;
    if (get_buffer(co, &code, 0, "b", &cf, "code") < 0) {
        PyBuffer_Release(&summed);
        return NULL;
    }
    if (get_buffer(oo, &out, 1, "df", &of, "out") < 0) {
        PyBuffer_Release(&summed);
        PyBuffer_Release(&code);
        return NULL;
    }
    if (get_buffer(flo, &flags, 1, "B?", &ff, "flags") < 0) {
        PyBuffer_Release(&summed);
        PyBuffer_Release(&code);
        PyBuffer_Release(&out);
        return NULL;
    }
    Py_ssize_t n = items(&code), bad = 0;
    Py_ssize_t cols = n ? items(&summed) / n : fmt.limbs;
    if (items(&out) != n || items(&flags) != n || items(&summed) != n * cols
            || (cols != fmt.limbs && cols != fmt.limbs + 1)) {
        PyErr_SetString(PyExc_ValueError, "decode: summed, code, out and flags must have one row each per element");
    } else {
        const int64_t *s = summed.buf;
        const int8_t *c = code.buf;
        uint8_t *fl = flags.buf;
        const Format f = fmt;
        int tally = cols > f.limbs;
        KERNEL_BEGIN(n * cols)
#define DECODE(L) for (Py_ssize_t i = 0; i < n; i++) { \
            double value; \
            fl[i] = decode_one(s + i * cols, c[i], &f, L, tally, check, &value); \
            bad += fl[i]; \
            store(out.buf, of, i, value); \
        }
        if (f.limbs == 2)
            DECODE(2)
        else
            DECODE(1)
#undef DECODE
        KERNEL_END
    }
    PyBuffer_Release(&summed);
    PyBuffer_Release(&code);
    PyBuffer_Release(&out);
    PyBuffer_Release(&flags);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(bad);
}

/* the first n columns of p rows (row r at rows + r * stride elements; rf 'd' or 'f') summed into out (of 'd' or
 * 'f') as sum_column does: in AVX2 registers where fixedpoint_sum_rows_simd can, else column by column;
 * returns how many columns were flagged (flags[j] = 1, where fl is not NULL) */
Py_ssize_t
sum_table(const void *rows, char rf, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n, const Format *f, void *out,
          char of, uint8_t *fl)
{
    int check = p >= (1 << (53 - LIMB_BITS));
    Py_ssize_t bad = check ? -1 : fixedpoint_sum_rows_simd(rows, rf, stride, p, n, f, out, of, fl);
    if (bad >= 0)
        return bad;
    bad = 0;
    /* one loop per element type and limb count (their constants folded in); two rows, the usual table of a
     * 2-process sum, unrolled */
#define SUM_ROWS(T, L, P) for (Py_ssize_t j = 0; j < n; j++) { \
        double value; \
        int b = sum_column_##T((const T *)rows + j, stride, (P), f, L, check, &value); \
        if (fl) \
            fl[j] = (uint8_t)b; \
        bad += b; \
        store(out, of, j, value); \
    }
    if (rf == 'd' && f->limbs == 2 && p == 2)
        SUM_ROWS(double, 2, 2)
    else if (rf == 'd' && f->limbs == 2)
        SUM_ROWS(double, 2, p)
    else if (rf == 'd')
        SUM_ROWS(double, 1, p)
    else if (f->limbs == 1 && p == 2)
        SUM_ROWS(float, 1, 2)
    else if (f->limbs == 1)
        SUM_ROWS(float, 1, p)
    else
        SUM_ROWS(float, 2, p)
#undef SUM_ROWS
    return bad;
}

/* sum_rows(rows, p, out, fmt, flags): the first n = len(out) columns of rows (p rows of float64 or float32,
 * of any equal length: a gathered table may carry more after each contribution) summed per column as the
 * reproducible Allreduce sums p contributions (codes, their MAX, limbs, their sum, one rounding) into
 * out (float64 or float32); columns that need fixedpoint.combine get flags[j] = 1 (and a value to be
 * overwritten), the others 0; returns how many.  flags None: no flags (a small call's usual case, where
 * none is flagged; else the caller runs it again with flags) */
static PyObject *
sum_rows(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ro, *oo, *fo, *flo;
    Py_ssize_t p;
    Format fmt;
    if (!PyArg_ParseTuple(args, "OnOOO", &ro, &p, &oo, &fo, &flo) || parse_format(fo, &fmt) < 0)
        return NULL;
    Py_buffer rows, out, flags;
    char rf, of, ff;
    if (get_buffer(ro, &rows, 0, "df", &rf, "rows") < 0)
        return NULL;
    if (get_buffer(oo, &out, 1, "df", &of, "out") < 0) {
        PyBuffer_Release(&rows);
        return NULL;
    }
    int flagged = flo != Py_None;
    if (flagged && get_buffer(flo, &flags, 1, "B?", &ff, "flags") < 0) {
        PyBuffer_Release(&rows);
        PyBuffer_Release(&out);
        return NULL;
    }
    Py_ssize_t n = items(&out), bad = 0, stride = p > 0 ? items(&rows) / p : 0;
    if (p < 1 || items(&rows) != p * stride || stride < n || (flagged && items(&flags) != n)) {
        PyErr_SetString(PyExc_ValueError, "sum_rows: rows must be p rows of len(out) elements or more, flags "
                        "len(out)");
    } else {
        const Format f = fmt;
        KERNEL_BEGIN(p * n)
        bad = sum_table(rows.buf, rf, stride, p, n, &f, out.buf, of, flagged ? flags.buf : NULL);
        KERNEL_END
    }
    PyBuffer_Release(&rows);
    PyBuffer_Release(&out);
    if (flagged)
        PyBuffer_Release(&flags);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(bad);
}

static PyMethodDef methods[] = {
    {"codes", codes, METH_VARARGS, "codes(x, out, fmt): each element's window code (fixedpoint.codes)"},
    {"encode", encode, METH_VARARGS, "encode(x, code, out, fmt): limbs in the agreed windows (fixedpoint.encode)"},
    {"decode", decode, METH_VARARGS,
     "decode(summed, code, out, fmt, check, flags): the summed limbs rounded once; returns the flagged count"},
    {"sum_rows", sum_rows, METH_VARARGS,
     "sum_rows(rows, p, out, fmt, flags): p contributions summed per column; returns the flagged count"},
    {"run_planned", (PyCFunction)(void (*)(void))run_planned, METH_FASTCALL,
     "run_planned(comm, algorithm, reproducible, send, recv, op): True where kept gathered stages ran the "
     "Allreduce"},
    {"sum_hit", (PyCFunction)(void (*)(void))sum_hit, METH_FASTCALL,
     "sum_hit(hit, recv): kept gathered stages' table summed into recv"},
    {"init_planned", init_planned, METH_VARARGS,
     "init_planned(run_blocking, sum_table, definition, ndarray, SUM, IN_PLACE, CommState, DEFAULT): run_planned's "
     "references"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "mpicoll.data._fixedpoint",
    "The reproducible sums' local passes, compiled (mpicoll.data.fixedpoint is the definition).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__fixedpoint(void)
{
    return PyModule_Create(&module);
}
