/* mpicoll.data._fixedpoint's element-level arithmetic, shared by _fixedpoint.c (the passes over buffers)
 * and _fixedpoint_simd.c (sum_rows's columns four at a time in AVX2 registers): the formats, their tables,
 * one value's code, its limbs, their sum rounded back, and one column of a table summed (see _fixedpoint.c's
 * opening comment for the arithmetic). */
#ifndef MPICOLL_FIXEDPOINT_H
#define MPICOLL_FIXEDPOINT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "the limb extraction needs double arithmetic rounded as written (FLT_EVAL_METHOD == 0)"
#endif

/* a kernel's loop lets the GIL go only where it has at least RELEASE_ITEMS elements to pass over: a smaller
 * call's would give the GIL to a waiting thread (the progress thread of a request in flight) and wait for it
 * back, several microseconds against its loop's fraction of one */
#define RELEASE_ITEMS 4096
#define KERNEL_BEGIN(items) { PyThreadState *unlocked_ = (items) >= RELEASE_ITEMS ? PyEval_SaveThread() : NULL;
#define KERNEL_END if (unlocked_ != NULL) PyEval_RestoreThread(unlocked_); }

#define LIMB_BITS 44
#define NEG_ZERO (-128)
#define INF_CODE 126
#define NAN_CODE 127
#define FINITE0 (-127)
#define HIGHEST 1015
#define COUNT_BITS 20
#define MAX_LIMBS 2
#define EXACT 9007199254740992.0   /* 2**53 */

struct Tables;

/* One dtype's format (mpicoll.data.fixedpoint.Format): what the codes and windows need. */
typedef struct {
    int floor, ceiling, step, emax, limbs;
    int shift;          /* log2(step) */
    int highest_code;   /* the code of the highest window (that of INF and NAN) */
    const struct Tables *t;   /* what the loops look up instead of computing (see Tables) */
} Format;

#define INLINE static inline __attribute__((always_inline))

/* -- one element ---------------------------------------------------------------------------------- */

static inline uint64_t
bits_of(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double
double_of(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* the code of a value from its raw exponent (|x| < 2**raw for normals) and whether it is -0.0 or NaN;
 * branch-free, in 32-bit integers, so that the compiler can run a loop of it in vector registers */
INLINE int32_t
code_from(int32_t raw, int32_t negzero, int32_t nan, const Format *fmt)
{
    int32_t e = raw < fmt->floor ? fmt->floor : raw;
    e = e > fmt->ceiling ? fmt->ceiling : e;
    int32_t code = ((e - fmt->floor + fmt->step - 1) >> fmt->shift) + FINITE0;   /* ceil((e - floor) / step) */
    code = raw > fmt->emax ? (nan ? NAN_CODE : INF_CODE) : code;
    return negzero ? NEG_ZERO : code;
}

/* 2**e as a double, for -1074 <= e <= 1023 (subnormal below -1022): multiplying an integer below 2**53
 * by it is exact wherever the product is in range, as ldexp is, and costs no call */
INLINE double
pow2(int e)
{
    return e >= -1022 ? double_of((uint64_t)(e + 1023) << 52) : double_of(UINT64_C(1) << (e + 1074));
}

/* the window top of an agreed code */
INLINE int
top_of(int code, const Format *fmt)
{
    code = code == NEG_ZERO ? FINITE0 : code >= INF_CODE ? fmt->highest_code : code;
    return (code - FINITE0) * fmt->step + fmt->floor;
}

/* What depends only on a value's exponent field or on an agreed code, computed once per format: the loops
 * look it up (one load) instead of computing it per element.  Indexed by code + 128. */
typedef struct Tables {
    int key[5];                       /* floor, ceiling, step, emax, limbs; limbs 0: unused */
    int8_t code64[2048], code32[256]; /* a non-NaN value's code by its exponent field (double, float) */
    double prescale[256];             /* 2**-64 for the windows above HIGHEST (exact at their unit), else 1 */
    uint64_t magic[256];              /* limb 0's magic number, 1.5 * 2**(top - 44 + 52), after the prescale */
    double unit[MAX_LIMBS][256];      /* limb k's unit, 2**(top - 44*(k+1)) */
    uint8_t high[256];                /* top > HIGHEST: a double sum may overflow where integers would not */
} Tables;

/* a value's code through the tables: its exponent field's, NaN's (its bits above infinity's), or -0.0's */
INLINE int32_t
code_of_double(double x, const Format *fmt)
{
    uint64_t u = bits_of(x);
    int32_t code = fmt->t->code64[u >> 52 & 0x7FF];
    code = u << 1 > UINT64_C(0x7FF) << 53 ? NAN_CODE : code;
    return u == UINT64_C(1) << 63 ? NEG_ZERO : code;
}

INLINE int32_t
code_of_float(float x, const Format *fmt)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    int32_t code = fmt->t->code32[u >> 23 & 0xFF];
    code = u << 1 > UINT32_C(0xFF) << 24 ? NAN_CODE : code;
    return u == UINT32_C(1) << 31 ? NEG_ZERO : code;
}

/* x's limbs in the window of `code`, stored in acc[0 .. limbs-1] (added there with `add`); with `tally`,
 * its count of +inf, -inf and NaN stored (added) in acc[limbs] (a non-finite x then has no limbs) */
INLINE void
encode_one(double x, int code, const Format *fmt, int limbs, int tally, int add, int64_t *acc)
{
    if (tally) {
        int64_t count = isfinite(x) ? 0 : x != x ? INT64_C(1) << (2 * COUNT_BITS)
                                                 : x > 0 ? INT64_C(1) : INT64_C(1) << COUNT_BITS;
        acc[limbs] = add ? acc[limbs] + count : count;
        x = isfinite(x) ? x : 0.0;
    }
    x *= fmt->t->prescale[code + 128];
    uint64_t magic = fmt->t->magic[code + 128];
    double rest = x;
    for (int k = 0; k < limbs; k++) {
        double m = double_of(magic);
        double y = rest + m;
        int64_t limb = (int64_t)(bits_of(y) - magic);
        acc[k] = add ? acc[k] + limb : limb;
        if (k + 1 < limbs) {
            y -= m;
            rest = rest - y;
            magic -= (uint64_t)LIMB_BITS << 52;
        }
    }
}

/* the sum of `limbs` (and tally) in the window of `code` as a double in *out; returns 0 there, or 1
 * where it must be rounded in integers instead (flagged: *out is then meaningless).  Without a tally
 * column, an element whose code is INF or NAN has its counts in limb 0 (see encode). */
INLINE int
decode_one(const int64_t *sums, int code, const Format *fmt, int limbs, int tally, int check, double *out)
{
    const Tables *t = fmt->t;
    int i = code + 128, bad = 0;
    double value = 0.0;
    for (int k = 0; k < limbs; k++) {
        double f = (double)sums[k];
        bad |= check & !(fabs(f) < EXACT);
        value = k == 0 ? f * t->unit[0][i] : value + f * t->unit[k][i];
    }
    bad |= limbs > 1 && t->high[i] && !isfinite(value);
    bad &= code != NEG_ZERO;
    value = code == NEG_ZERO ? -0.0 : value;
    if (tally || code >= INF_CODE) {   /* the counts: in their column, or in limb 0 (encode's inline) */
        int64_t mask = (INT64_C(1) << COUNT_BITS) - 1, t = sums[tally ? limbs : 0];
        int64_t pos = t & mask, neg = (t >> COUNT_BITS) & mask, nan = t >> (2 * COUNT_BITS);
        int special = nan > 0 || pos > 0 || neg > 0;
        value = !special ? value : nan > 0 || (pos > 0 && neg > 0) ? NAN : pos > 0 ? INFINITY : -INFINITY;
        bad &= !special;
    }
    *out = value;
    return bad;
}

/* the usual column of a table (sum_rows): p finite terms, not all -0.0, in a window at most HIGHEST, fewer
 * than 512 of them: encode_one and decode_one without their special cases (no tally, no prescale, no
 * flag), the limbs kept in registers */
#define SUM_FINITE(T) \
INLINE double \
sum_finite_##T(const T *col, Py_ssize_t stride, Py_ssize_t p, int code, const Format *fmt, int limbs) \
{ \
    const Tables *t = fmt->t; \
    const int i = code + 128; \
    const uint64_t magic0 = t->magic[i], magic1 = magic0 - ((uint64_t)LIMB_BITS << 52); \
    const double m0 = double_of(magic0), m1 = double_of(magic1); \
    int64_t a0 = 0, a1 = 0; \
    for (Py_ssize_t r = 0; r < p; r++) { \
        double v = (double)col[r * stride], y = v + m0; \
        a0 += (int64_t)(bits_of(y) - magic0); \
        if (limbs > 1) \
            a1 += (int64_t)(bits_of((v - (y - m0)) + m1) - magic1); \
    } \
    double value = (double)a0 * t->unit[0][i]; \
    return limbs > 1 ? value + (double)a1 * t->unit[1][i] : value; \
}
SUM_FINITE(double)
SUM_FINITE(float)

/* store a decoded double in a double or a float output (the cast rounds once, to nearest: IEEE 754's
 * conversion, inf where the rounded value is beyond the float range, as NumPy's astype) */
static inline void
store(void *out, char of, Py_ssize_t i, double value)
{
    if (of == 'd')
        ((double *)out)[i] = value;
    else
        ((float *)out)[i] = (float)value;
}

/* column j of a table of p rows (row r at col[r * stride]) summed as the reproducible Allreduce sums p
 * contributions (codes, their MAX, limbs, their sum, one rounding) into *value; returns 1 where the column
 * must be rounded by fixedpoint.combine instead (then *value is meaningless), else 0.  The codes' MAX is
 * that of the largest exponent field (the codes rise with it) but for fields 0 (zeros and subnormals: is
 * every term -0.0?) and all ones (inf and NaN), where each term's code is read. */
#define SUM_COLUMN(T, U, CODE_OF, TABLE, SHIFT, ONES) \
INLINE int \
sum_column_##T(const T *col, Py_ssize_t stride, Py_ssize_t p, const Format *f, int limbs, int check, \
               double *value) \
{ \
    U field = 0; \
    for (Py_ssize_t r = 0; r < p; r++) { \
        U u; \
        memcpy(&u, &col[r * stride], sizeof u); \
        u = (u >> SHIFT) & ONES; \
        field = u > field ? u : field; \
    } \
    int code = f->t->TABLE[field]; \
    if (field == 0 || field == ONES) \
        for (Py_ssize_t r = 0; r < p; r++) { \
            int c = CODE_OF(col[r * stride], f); \
            code = r == 0 || c > code ? c : code; \
        } \
    if (code > NEG_ZERO && code < INF_CODE && !check && !f->t->high[code + 128]) { \
        *value = sum_finite_##T(col, stride, p, code, f, limbs); \
        return 0; \
    } \
    int64_t acc[MAX_LIMBS + 1] = {0}; \
    int tally = code >= INF_CODE; \
    for (Py_ssize_t r = 0; r < p; r++) \
        encode_one((double)col[r * stride], code, f, limbs, tally, 1, acc); \
    return decode_one(acc, code, f, limbs, tally, check, value); \
}
SUM_COLUMN(double, uint64_t, code_of_double, code64, 52, 0x7FF)
SUM_COLUMN(float, uint32_t, code_of_float, code32, 23, 0xFF)

/* _fixedpoint_simd.c: sum_rows's loop over the n columns of p rows (float64 'd' or float32 'f', as
 * rf says) for p < SIMD_TERMS, in AVX2 registers where the processor has them; returns how many columns
 * were flagged (flags[j] = 1 where fl is not NULL), or -1 where it cannot run (then the caller sums them) */
#define SIMD_TERMS 128
int fixedpoint_simd_ready(void);
Py_ssize_t fixedpoint_sum_rows_simd(const void *rows, char rf, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n,
                                    const Format *f, void *out, char of, uint8_t *fl);

/* _fixedpoint.c's, for _gathered.c: a format tuple parsed; a C-contiguous buffer of one of the formats; the
 * first n columns of p rows summed */
int parse_format(PyObject *tuple, Format *fmt);
int get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *formats, char *found, const char *what);
Py_ssize_t sum_table(const void *rows, char rf, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n, const Format *f,
                     void *out, char of, uint8_t *fl);

/* _gathered.c: a small reproducible Allreduce's blocking hit */
PyObject *run_planned(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *sum_hit(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *init_planned(PyObject *self, PyObject *args);

#endif
