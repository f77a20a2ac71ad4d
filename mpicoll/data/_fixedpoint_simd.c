/* mpicoll.data._fixedpoint: sum_rows's columns four at a time, in AVX2 registers.
 *
 * The arithmetic of sum_column (_fixedpoint.h) on four columns at once, with the same operations in the same
 * order on each, so the same bits: the largest exponent field of each column, its window (looked up: the
 * window's index by field, then limb 0's magic number and the limbs' units by index, in gathers), each term's
 * limbs by the magic-number additions, their integer sums, and one rounding back.  What differs is only how
 * an integer sum becomes a double: AVX2 has no int64 -> double conversion, so a sum s with |s| < 2**51 is
 * read as the double whose bits are those of 1.5 * 2**52 plus s, less 1.5 * 2**52 (exact: the ulp at 2**52
 * is 1).  Each limb is at most 2**44 in magnitude, so that holds for fewer than SIMD_TERMS = 2**7 rows.
 *
 * A block of four columns where some column needs sum_column's special cases (an infinity or a NaN; a
 * window above HIGHEST) is summed by sum_column, column by column, as are the last n % 4 columns.  A column
 * of zeros and subnormals only takes the lowest window, as sum_column does, unless every term is -0.0: its
 * sum is then -0.0 (sum_column's NEG_ZERO code).
 *
 * Built where the compiler targets x86-64 (GCC or Clang: the functions are compiled for AVX2 alone and
 * chosen at run time, where the processor has it); elsewhere fixedpoint_sum_rows_simd returns -1 and
 * _fixedpoint.c's scalar loop sums every column.  No FMA: a product and a sum are rounded each, as in C.
 */
#include "_fixedpoint.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

int
fixedpoint_simd_ready(void)
{
    static int ready = -1;
    if (ready < 0) {
        __builtin_cpu_init();
        ready = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return ready;
}

/* four int64 sums (each below 2**51 in magnitude) as doubles, exactly */
AVX2 static inline __m256d
to_double(__m256i sums)
{
    const __m256d shift = _mm256_set1_pd(0x1.8p52);
    return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_add_epi64(sums, _mm256_castpd_si256(shift))), shift);
}

/* 2**e in each lane as a double, for normal powers (-1022 <= e <= 1023) */
AVX2 static inline __m256d
pow2v(__m256i e)
{
    return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(e, _mm256_set1_epi64x(1023)), 52));
}

/* the lowest window top whose limbs' units are normal doubles (a lower one, whose values are below
 * 2**LOWEST, takes sum_column: its units may be subnormal or 0) */
#define LOWEST (-1022 + MAX_LIMBS * LIMB_BITS)

/* The windows of four columns from their largest exponent fields (int32 lanes; bias: 1022 for double, 126
 * for float, so that |x| < 2**(field - bias)): the table's arithmetic (code_from, then top_of) in registers,
 * the tops in int64 lanes in *top; returns whether some column needs sum_column (a field of all ones: inf or
 * NaN; a window above HIGHEST, whose limbs are prescaled; one below LOWEST) */
AVX2 static inline int
windows(__m128i field, int bias, int ones, const Format *f, __m256i *top)
{
    __m128i e = _mm_sub_epi32(field, _mm_set1_epi32(bias));
    e = _mm_min_epi32(_mm_max_epi32(e, _mm_set1_epi32(f->floor)), _mm_set1_epi32(f->ceiling));
    e = _mm_sub_epi32(e, _mm_set1_epi32(f->floor - f->step + 1));    /* ceil((e - floor) / step) * step + floor */
    e = _mm_add_epi32(_mm_slli_epi32(_mm_srli_epi32(e, f->shift), f->shift), _mm_set1_epi32(f->floor));
    __m128i bad = _mm_or_si128(_mm_cmpeq_epi32(field, _mm_set1_epi32(ones)), _mm_cmpgt_epi32(e, _mm_set1_epi32(HIGHEST)));
    bad = _mm_or_si128(bad, _mm_cmpgt_epi32(_mm_set1_epi32(LOWEST), e));
    *top = _mm256_cvtepi32_epi64(e);
    return _mm_movemask_ps(_mm_castsi128_ps(bad));
}

/* limb 0's magic number in the windows of tops, 1.5 * 2**(top - 44 + 52) (the table's, below HIGHEST) */
AVX2 static inline __m256i
magic_of(__m256i top)
{
    __m256i e = _mm256_add_epi64(top, _mm256_set1_epi64x(1023 + 52 - LIMB_BITS));
    return _mm256_or_si256(_mm256_slli_epi64(e, 52), _mm256_set1_epi64x(INT64_C(1) << 51));
}

/* the rounded sums of four columns from their limbs' sums (sum_finite's last lines: each limb sum times its
 * unit, 2**(top - 44*(k+1)), added), -0.0 where every term was -0.0 (all_neg_zero's lanes all ones) */
AVX2 static inline __m256d
rounded(__m256i top, __m256i a0, __m256i a1, int limbs, __m256d all_neg_zero)
{
    __m256i e = _mm256_sub_epi64(top, _mm256_set1_epi64x(LIMB_BITS));
    __m256d value = _mm256_mul_pd(to_double(a0), pow2v(e));
    if (limbs > 1)
        value = _mm256_add_pd(value, _mm256_mul_pd(to_double(a1),
                                                   pow2v(_mm256_sub_epi64(e, _mm256_set1_epi64x(LIMB_BITS)))));
    return _mm256_blendv_pd(value, _mm256_set1_pd(-0.0), all_neg_zero);
}

/* four terms' limbs added to a0 (and a1) in the windows of magic0 (sum_finite's loop body) */
AVX2 static inline void
add_limbs(__m256d v, __m256i magic0, int limbs, __m256i *a0, __m256i *a1)
{
    __m256d m0 = _mm256_castsi256_pd(magic0), y = _mm256_add_pd(v, m0);
    *a0 = _mm256_add_epi64(*a0, _mm256_sub_epi64(_mm256_castpd_si256(y), magic0));
    if (limbs > 1) {
        __m256i magic1 = _mm256_sub_epi64(magic0, _mm256_set1_epi64x((int64_t)LIMB_BITS << 52));
        __m256d rest = _mm256_sub_pd(v, _mm256_sub_pd(y, m0));
        __m256d y1 = _mm256_add_pd(rest, _mm256_castsi256_pd(magic1));
        *a1 = _mm256_add_epi64(*a1, _mm256_sub_epi64(_mm256_castpd_si256(y1), magic1));
    }
}

/* the four results stored at out[j..j+3] (double, or float rounded once by the conversion), flags 0 */
AVX2 static inline void
store4(void *out, char of, Py_ssize_t j, __m256d value, uint8_t *fl)
{
    if (of == 'd')
        _mm256_storeu_pd((double *)out + j, value);
    else
        _mm_storeu_ps((float *)out + j, _mm256_cvtpd_ps(value));
    if (fl)
        memset(fl + j, 0, 4);
}

/* columns j .. j+3 by sum_column, one by one (a block with a special case, or the last columns) */
#define SCALAR(T, L) for (Py_ssize_t k = j; k < j + 4 && k < n; k++) { \
        double value; \
        int b = sum_column_##T(rows + k, stride, p, f, L, 0, &value); \
        if (fl) \
            fl[k] = (uint8_t)b; \
        bad += b; \
        store(out, of, k, value); \
    }

/* float64 rows: each column's window from the largest exponent field of its four 64-bit lanes */
AVX2 INLINE Py_ssize_t
sum_double(const double *rows, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n, const Format *format, int limbs,
           void *out, char of, uint8_t *fl)
{
    const Format copy = *format, *f = &copy;    /* (its fields stay in registers across the stores) */
    const __m256i ones = _mm256_set1_epi64x(0x7FF), sign = _mm256_set1_epi64x(INT64_MIN);
    Py_ssize_t bad = 0, j = 0;
    for (; j + 4 <= n; j += 4) {
        __m256i field = _mm256_setzero_si256(), other = _mm256_setzero_si256();
        for (Py_ssize_t r = 0; r < p; r++) {
            __m256i u = _mm256_loadu_si256((const __m256i *)(rows + r * stride + j));
            /* (fields below 2**11 in the low half of each lane: a 32-bit max is the 64-bit one) */
            field = _mm256_max_epi32(field, _mm256_and_si256(_mm256_srli_epi64(u, 52), ones));
            other = _mm256_or_si256(other, _mm256_xor_si256(u, sign));      /* zero where all are -0.0 */
        }
        __m256i top;     /* (the fields, in the low halves of the 64-bit lanes, packed into 32-bit lanes) */
        __m128i packed = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(field, _mm256_setr_epi32(0, 2, 4, 6,
                                                                                                       0, 2, 4, 6)));
        if (windows(packed, 1022, 0x7FF, f, &top)) {
            SCALAR(double, limbs)
            continue;
        }
        __m256i magic0 = magic_of(top);
        __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
        for (Py_ssize_t r = 0; r < p; r++)
            add_limbs(_mm256_loadu_pd(rows + r * stride + j), magic0, limbs, &a0, &a1);
        __m256d negzero = _mm256_castsi256_pd(_mm256_cmpeq_epi64(other, _mm256_setzero_si256()));
        store4(out, of, j, rounded(top, a0, a1, limbs, negzero), fl);
    }
    if (j < n)
        SCALAR(double, limbs)
    return bad;
}

/* float32 rows: four columns' fields in 32-bit lanes, their terms widened to double exactly */
AVX2 INLINE Py_ssize_t
sum_float(const float *rows, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n, const Format *format, int limbs,
          void *out, char of, uint8_t *fl)
{
    const Format copy = *format, *f = &copy;
    const __m128i ones = _mm_set1_epi32(0xFF), sign = _mm_set1_epi32(INT32_MIN);
    Py_ssize_t bad = 0, j = 0;
    for (; j + 4 <= n; j += 4) {
        __m128i field = _mm_setzero_si128(), other = _mm_setzero_si128();
        for (Py_ssize_t r = 0; r < p; r++) {
            __m128i u = _mm_loadu_si128((const __m128i *)(rows + r * stride + j));
            field = _mm_max_epi32(field, _mm_and_si128(_mm_srli_epi32(u, 23), ones));
            other = _mm_or_si128(other, _mm_xor_si128(u, sign));
        }
        __m256i top;
        if (windows(field, 126, 0xFF, f, &top)) {
            SCALAR(float, limbs)
            continue;
        }
        __m256i magic0 = magic_of(top);
        __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
        for (Py_ssize_t r = 0; r < p; r++)
            add_limbs(_mm256_cvtps_pd(_mm_loadu_ps(rows + r * stride + j)), magic0, limbs, &a0, &a1);
        __m256d negzero = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_cmpeq_epi32(other, _mm_setzero_si128())));
        store4(out, of, j, rounded(top, a0, a1, limbs, negzero), fl);
    }
    if (j < n)
        SCALAR(float, limbs)
    return bad;
}
#undef SCALAR

/* one instance per type, limb count and p == 2 (a 2-process sum's table) or not, their constants folded in */
AVX2 static Py_ssize_t
sum_double_2(const double *rows, Py_ssize_t stride, Py_ssize_t n, const Format *f, void *out, char of, uint8_t *fl)
{
    return sum_double(rows, stride, 2, n, f, 2, out, of, fl);
}

AVX2 static Py_ssize_t
sum_double_p(const double *rows, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n, const Format *f, void *out, char of,
             uint8_t *fl)
{
    return f->limbs == 2 ? sum_double(rows, stride, p, n, f, 2, out, of, fl)
                         : sum_double(rows, stride, p, n, f, 1, out, of, fl);
}

AVX2 static Py_ssize_t
sum_float_2(const float *rows, Py_ssize_t stride, Py_ssize_t n, const Format *f, void *out, char of, uint8_t *fl)
{
    return sum_float(rows, stride, 2, n, f, 1, out, of, fl);
}

AVX2 static Py_ssize_t
sum_float_p(const float *rows, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n, const Format *f, void *out, char of,
            uint8_t *fl)
{
    return f->limbs == 2 ? sum_float(rows, stride, p, n, f, 2, out, of, fl)
                         : sum_float(rows, stride, p, n, f, 1, out, of, fl);
}

Py_ssize_t
fixedpoint_sum_rows_simd(const void *rows, char rf, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n,
                         const Format *f, void *out, char of, uint8_t *fl)
{
    if (p >= SIMD_TERMS || !fixedpoint_simd_ready())
        return -1;
    if (rf == 'd')
        return p == 2 && f->limbs == 2 ? sum_double_2(rows, stride, n, f, out, of, fl)
                                       : sum_double_p(rows, stride, p, n, f, out, of, fl);
    return p == 2 && f->limbs == 1 ? sum_float_2(rows, stride, n, f, out, of, fl)
                                   : sum_float_p(rows, stride, p, n, f, out, of, fl);
}

#else   /* not x86-64: the scalar loop sums every column */

int
fixedpoint_simd_ready(void)
{
    return 0;
}

Py_ssize_t
fixedpoint_sum_rows_simd(const void *rows, char rf, Py_ssize_t stride, Py_ssize_t p, Py_ssize_t n,
                         const Format *f, void *out, char of, uint8_t *fl)
{
    (void)rows, (void)rf, (void)stride, (void)p, (void)n, (void)f, (void)out, (void)of, (void)fl;
    return -1;
}

#endif
