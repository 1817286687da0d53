// The row-wise kernels for one vector width: included once per SimdLevel by
// rowwise_kernels.cc, inside a namespace of its own and under a
// `#pragma GCC target` for that level, with kW (floats per vector) defined.
// Everything here is compiled for that target, so the helpers inline into
// each other and intrinsics of the level may be used.

template <int W>
struct V {
  typedef float F __attribute__((vector_size(4 * W)));
  typedef std::int32_t I __attribute__((vector_size(4 * W)));
  typedef std::uint8_t B __attribute__((vector_size(W)));
  typedef std::uint8_t B4 __attribute__((vector_size(4 * W)));
  typedef std::uint64_t U __attribute__((vector_size(4 * W)));
};

template <class T>
SPARQ_INLINE T load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // unaligned
  return v;
}
template <class T>
SPARQ_INLINE void store(void* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// Lane shuffles with W-dependent index lists.
template <int W, std::size_t... K>
SPARQ_INLINE typename V<W>::I evens(typename V<W>::I a, typename V<W>::I b, std::index_sequence<K...>) {
  return __builtin_shufflevector(a, b, (2 * K)...);
}
template <int W, std::size_t... K>
SPARQ_INLINE typename V<W>::I odds(typename V<W>::I a, typename V<W>::I b, std::index_sequence<K...>) {
  return __builtin_shufflevector(a, b, (2 * K + 1)...);
}
// Lanes a0 b0 a1 b1 ... from the low (half = 0) or high (half = W/2) halves.
template <int W, std::size_t... K>
SPARQ_INLINE typename V<W>::I zip(typename V<W>::I a, typename V<W>::I b, std::size_t half, std::index_sequence<K...>) {
  if (half == 0) return __builtin_shufflevector(a, b, ((K % 2) * W + K / 2)...);
  return __builtin_shufflevector(a, b, ((K % 2) * W + W / 2 + K / 2)...);
}
// The low byte of every 32-bit lane (all lanes hold values < 256).
// AVX-512 has this as one instruction (vpmovdb), which GCC emits for the
// conversion; AVX2 turns the byte shuffle into pshufb; SSE2 has no pshufb
// (GCC would go lane by lane) but its saturating packs do it exactly here.
template <int W, std::size_t... K>
SPARQ_INLINE typename V<W>::B low_bytes(typename V<W>::I a, std::index_sequence<K...>) {
  if constexpr (W == 16) {
#if defined(SPARQ_KERNELS_AVX512)
    // The intrinsic: GCC 12 turned the conversion of 8-bit codes (whose
    // lanes still hold the rounding constant's high bits) into byte inserts.
    return reinterpret_cast<typename V<W>::B>(_mm512_cvtepi32_epi8(reinterpret_cast<__m512i>(a)));
#else
    return __builtin_convertvector(a, typename V<W>::B);
#endif
  } else {
#if defined(__x86_64__)
    if constexpr (W == 4) {
      const __m128i w = _mm_packs_epi32(reinterpret_cast<__m128i>(a), reinterpret_cast<__m128i>(a));
      const std::uint32_t v = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_packus_epi16(w, w)));
      typename V<W>::B out;
      std::memcpy(&out, &v, sizeof out);
      return out;
    }
#endif
    const auto b = reinterpret_cast<typename V<W>::B4>(a);
    return __builtin_shufflevector(b, b, (4 * K)...);
  }
}

// Lane j of the result: x[2j] | x[2j+1] << shift, x = a then b.
template <int W>
SPARQ_INLINE typename V<W>::I pair_up(typename V<W>::I a, typename V<W>::I b, int shift) {
  constexpr auto k = std::make_index_sequence<W>{};
  return evens<W>(a, b, k) | (odds<W>(a, b, k) << shift);
}

// Lanes rotated down by H.
template <int W, int H, class T, std::size_t... K>
SPARQ_INLINE T rotate(T m, std::index_sequence<K...>) {
  return __builtin_shufflevector(m, m, ((K + H) % W)...);
}

// Whether any lane has its sign bit set: one instruction where the level
// has it. Signs, not comparison masks: GCC 12 scalarizes turning AVX-512
// mask registers into vector lanes.
template <int W>
SPARQ_INLINE bool any_sign(typename V<W>::I m) {
#if defined(__x86_64__)
  if constexpr (W == 16) return _mm512_movepi32_mask(reinterpret_cast<__m512i>(m)) != 0;
  if constexpr (W == 8) return _mm256_movemask_ps(reinterpret_cast<__m256>(m)) != 0;
  if constexpr (W == 4) return _mm_movemask_ps(reinterpret_cast<__m128>(m)) != 0;
#endif
  for (int j = 0; j < W; ++j)
    if (m[j] < 0) return true;
  return false;
}

template <int W, int H = W / 2>
SPARQ_INLINE void reduce(typename V<W>::F& mn, typename V<W>::F& mx, typename V<W>::F& bad) {
  if constexpr (H > 0) {
    constexpr auto k = std::make_index_sequence<W>{};
    const auto a = rotate<W, H>(mn, k), b = rotate<W, H>(mx, k);
    mn = a < mn ? a : mn, mx = b > mx ? b : mx, bad += rotate<W, H>(bad, k);
    reduce<W, H / 2>(mn, mx, bad);
  }
}

// x[i..] as a T (a float or a vector), or with `sum`: sum[i..] += x[i..],
// the result. (Helpers, not lambdas: GCC may outline a lambda, and an
// outlined one is compiled for the baseline target.)
template <class T>
SPARQ_INLINE T summed(const float* x, float* sum, std::size_t i) {
  if (!sum) return load<T>(x + i);
  const T z = load<T>(sum + i) + load<T>(x + i);
  store(sum + i, z);
  return z;
}

// The first k (< W) floats or bytes of a vector, moved without a library
// call: a short row's whole tail goes through these, and a call to memcpy
// costs more than the copy.
template <int W>
SPARQ_INLINE typename V<W>::F load_part(const float* x, std::size_t k, float fill) {
#if defined(SPARQ_KERNELS_AVX512)
  if constexpr (W == 16)
    return reinterpret_cast<typename V<W>::F>(
        _mm512_mask_loadu_ps(_mm512_set1_ps(fill), static_cast<__mmask16>((1u << k) - 1), x));
#endif
  typename V<W>::F v = fill - typename V<W>::F{};
  for (std::size_t j = 0; j < k; ++j) v[j] = x[j];
  return v;
}
template <int W>
SPARQ_INLINE void store_part(float* out, std::size_t k, typename V<W>::F v) {
#if defined(SPARQ_KERNELS_AVX512)
  if constexpr (W == 16)
    return _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << k) - 1), reinterpret_cast<__m512>(v));
#endif
  for (std::size_t j = 0; j < k; ++j) out[j] = v[j];
}
// k <= 16 bytes into a zeroed 16-byte block, and back.
SPARQ_INLINE void load_bytes_part(const std::uint8_t* p, std::size_t k, std::uint8_t (&block)[16]) {
#if defined(SPARQ_KERNELS_AVX512)
  _mm_storeu_si128(reinterpret_cast<__m128i*>(block), _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << k) - 1), p));
  return;
#endif
  for (std::size_t j = 0; j < 16; ++j) block[j] = j < k ? p[j] : 0;
}
SPARQ_INLINE void store_bytes_part(std::uint8_t* p, std::size_t k, const std::uint8_t* block) {
#if defined(SPARQ_KERNELS_AVX512)
  _mm_mask_storeu_epi8(p, static_cast<__mmask16>((1u << k) - 1), _mm_loadu_si128(reinterpret_cast<const __m128i*>(block)));
  return;
#endif
  for (std::size_t j = 0; j < k; ++j) p[j] = block[j];
}

#if defined(SPARQ_KERNELS_AVX512) || defined(SPARQ_KERNELS_AVX2)
// The operations the intrinsics loops below need, for this copy's level:
// AVX-512 keeps lane flags in mask registers and tails in masked loads,
// AVX2 in vectors (and has no VREDUCEPS: q - round(q) is the same value).
struct Simd {
#if defined(SPARQ_KERNELS_AVX512)
  using F = __m512;
  using Flags = __mmask16;
  static constexpr int W = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static Flags none() { return 0; }
  static Flags unordered(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
  // Lanes whose |q - rne(q)| exceeds edge (NaN included).
  static Flags beyond(F q, F edge) {
    return _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_reduce_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), edge,
                              _CMP_NLE_UQ);
  }
  static Flags either(Flags a, Flags b) { return a | b; }
  static bool any(Flags f) { return f != 0; }
  // x[i, i + k) (k < W), the other lanes from `fill`; with `sum`: sum += x there first.
  static F part(const float* x, float* sum, std::size_t i, std::size_t k, F fill) {
    const auto m = static_cast<__mmask16>((1u << k) - 1);
    if (!sum) return _mm512_mask_loadu_ps(fill, m, x + i);
    const F z = _mm512_add_ps(_mm512_maskz_loadu_ps(m, sum + i), _mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(sum + i, m, z);
    return _mm512_mask_mov_ps(fill, m, z);
  }
  static F first_everywhere(F v, std::size_t k) {  // lanes [k, W) <- lane 0
    return _mm512_mask_mov_ps(_mm512_broadcastss_ps(_mm512_castps512_ps128(v)), static_cast<__mmask16>((1u << k) - 1), v);
  }
  static __m128 half_min(F v) {  // 512 -> 256 -> 128 bits
    const __m256 h = _mm256_min_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    return _mm_min_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  }
  static __m128 half_max(F v) {
    const __m256 h = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    return _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  }
#else
  using F = __m256;
  using Flags = __m256;
  static constexpr int W = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static Flags none() { return _mm256_setzero_ps(); }
  static Flags unordered(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_UNORD_Q); }
  static Flags beyond(F q, F edge) {
    const F f = _mm256_sub_ps(q, _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return _mm256_cmp_ps(_mm256_and_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))), edge, _CMP_NLE_UQ);
  }
  static Flags either(Flags a, Flags b) { return _mm256_or_ps(a, b); }
  static bool any(Flags f) { return _mm256_movemask_ps(f) != 0; }
  static __m256i below(std::size_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F part(const float* x, float* sum, std::size_t i, std::size_t k, F fill) {
    const __m256i m = below(k);
    F z = _mm256_maskload_ps(x + i, m);
    if (sum) {
      z = _mm256_add_ps(_mm256_maskload_ps(sum + i, m), z);
      _mm256_maskstore_ps(sum + i, m, z);
    }
    return _mm256_blendv_ps(fill, z, _mm256_castsi256_ps(m));
  }
  static F first_everywhere(F v, std::size_t k) {
    return _mm256_blendv_ps(_mm256_broadcastss_ps(_mm256_castps256_ps128(v)), v, _mm256_castsi256_ps(below(k)));
  }
  static __m128 half_min(F v) { return _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); }
  static __m128 half_max(F v) { return _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); }
#endif
  // x[i, i + k) as a vector whose other lanes hold `fill` (a value of the
  // row, so they change no min or max), with `sum`: sum[i, i + k) += x first.
  static F summed(const float* x, float* sum, std::size_t i, std::size_t k, F fill) {
    if (k < W) return part(x, sum, i, k, fill);
    if (!sum) return load(x + i);  // a whole vector: plain loads and store
    const F z = add(load(sum + i), load(x + i));
    store(sum + i, z);
    return z;
  }
};

// range_impl in intrinsics: a NaN is flagged by one unordered compare per
// two vectors (min and max drop NaNs); the row's ragged end is a masked
// load; the reduction narrows to 128 bits before the last steps, cheaper
// than whole-register permutes.
SPARQ_INLINE RowRange range_simd(const float* x, float* sum, std::size_t n) {
  using S = Simd;
  const std::size_t k0 = n < S::W ? n : S::W;
  S::F mn0 = S::summed(x, sum, 0, k0, S::set1(0.0f));
  if (k0 < S::W) mn0 = S::first_everywhere(mn0, k0);  // a short row's empty lanes repeat its first value
  S::F mx0 = mn0, mn1 = mn0, mx1 = mn0;
  S::Flags nan = S::unordered(mn0, mn0);
  std::size_t i = S::W;
  for (; i + 2 * S::W <= n; i += 2 * S::W) {  // two vectors in flight
    const S::F a = S::summed(x, sum, i, S::W, mn0), b = S::summed(x, sum, i + S::W, S::W, mn0);
    mn0 = S::min(a, mn0), mx0 = S::max(a, mx0);
    mn1 = S::min(b, mn1), mx1 = S::max(b, mx1);
    nan = S::either(nan, S::unordered(a, b));
  }
  for (; i < n; i += S::W) {
    const S::F a = S::summed(x, sum, i, n - i, mn0);
    mn0 = S::min(a, mn0), mx0 = S::max(a, mx0);
    nan = S::either(nan, S::unordered(a, a));
  }
  __m128 lo = S::half_min(S::min(mn0, mn1)), hi = S::half_max(S::max(mx0, mx1));
  lo = _mm_min_ps(lo, _mm_movehl_ps(lo, lo)), hi = _mm_max_ps(hi, _mm_movehl_ps(hi, hi));
  lo = _mm_min_ss(lo, _mm_movehdup_ps(lo)), hi = _mm_max_ss(hi, _mm_movehdup_ps(hi));
  // + 0: a zero extreme is +0 whichever zero the row holds (as below); a
  // NaN anywhere makes lo NaN.
  const float bad = S::any(nan) ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  return {_mm_cvtss_f32(lo) + bad, _mm_cvtss_f32(hi) + 0.0f};
}
#endif

// With `sum` (error compensation): sum += x first, and the range is the
// sums' (one pass over the row instead of two).
template <int W>
SPARQ_INLINE RowRange range_impl(const float* x, float* sum, std::size_t n) {
#if defined(SPARQ_KERNELS_AVX512) || defined(SPARQ_KERNELS_AVX2)
  if constexpr (W == Simd::W) return range_simd(x, sum, n);
#endif
  using F = typename V<W>::F;
  // v - v is 0 for finite v and NaN for NaN and +-inf, and NaN sticks in
  // the sum `bad`, which is added to lo at the end.
  float lo, hi, bad;
  std::size_t i = 0;
  if (n >= 2 * W) {
    const F a0 = summed<F>(x, sum, 0), b0 = summed<F>(x, sum, W);
    F mn0 = a0, mx0 = a0, mn1 = b0, mx1 = b0, bv = (a0 - a0) + (b0 - b0);
    for (i = 2 * W; i + 2 * W <= n; i += 2 * W) {  // two vectors in flight
      const F a = summed<F>(x, sum, i), b = summed<F>(x, sum, i + W);
      mn0 = a < mn0 ? a : mn0, mx0 = a > mx0 ? a : mx0;
      mn1 = b < mn1 ? b : mn1, mx1 = b > mx1 ? b : mx1;
      bv += (a - a) + (b - b);
    }
    mn0 = mn1 < mn0 ? mn1 : mn0, mx0 = mx1 > mx0 ? mx1 : mx0;
    // Halving reductions (a scalar loop over the lanes would be a chain of
    // W dependent min/max, as long as the row's vector loop itself).
    reduce<W>(mn0, mx0, bv);
    lo = mn0[0], hi = mx0[0], bad = bv[0];
  } else {
    lo = hi = summed<float>(x, sum, 0);
    bad = lo - lo;
    i = 1;
  }
  for (; i < n; ++i) {
    const float v = summed<float>(x, sum, i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    bad += v - v;
  }
  // Which zero min/max return depends on the order of the comparisons (so on
  // W); adding +0 (bad, when finite) makes a zero +0 (-0 + 0 = +0), so the
  // bias on the wire is the same for every level.
  return {lo + bad, hi + 0.0f};
}

// The grid of a row, splatted, and the multiply-by-reciprocal shortcut.
//
// The code must be rne(clamp(fl((x - bias) / scale))): a true division (a
// reciprocal multiply rounds differently). Divisions are the slowest part of
// the loop, so it computes q = fl(d * fl(1 / scale)) first: relative to the
// exact quotient Q, |q - fl(Q)| <= |Q| * 1.51 * 2^-23 (two roundings in q,
// one in fl(Q)), and |Q| <= levels + 2 for every value of the row (bias <=
// min, bias + levels * scale >= max), so they differ by less than
// tol = (levels + 1) * 2^-21. Clamping keeps that and rounding to the nearest
// integer then agrees unless clamp(q) lies within tol of a half-integer;
// such a group is recomputed with the division (rare for real data, common
// for small integers, where it costs speed, never bits). When 1 / scale
// overflows (subnormal scale) every group divides.
template <int W>
struct Grid {
  typename V<W>::F scale, bias, inv, levels;
  typename V<W>::I edge_bits;
  bool divide, constant;
  Grid(float s, float b, float lv) : constant(s == 0.0f) {
    const float r = s == 0.0f ? 0.0f : 1.0f / s;  // scale 0 (a constant row): every code is 0
    divide = !std::isfinite(r);
    const float tol = (lv + 1.0f) * 0x1p-21f;
    scale = s - typename V<W>::F{}, bias = b - typename V<W>::F{}, inv = r - typename V<W>::F{};
    levels = lv - typename V<W>::F{};
    edge_bits = std::bit_cast<std::int32_t>(0.5f - tol) - typename V<W>::I{};
  }
};

template <int W>
SPARQ_INLINE typename V<W>::F clamp(typename V<W>::F q, const Grid<W>& g) {
  using F = typename V<W>::F;
  q = q < 0.0f ? F{} : q;  // only float rounding can leave [0, levels]
  return q > g.levels ? g.levels : q;
}

#if defined(SPARQ_KERNELS_AVX512) || defined(SPARQ_KERNELS_AVX2)
// encode_group in intrinsics, the same arithmetic in fewer instructions: the
// clamp is MAXPS/MINPS (equal to the selects for every finite q: a -0 that
// becomes +0 rounds to the same code), the distance to the nearest integer
// is one VREDUCEPS on AVX-512, and x - bias is reloaded for the rare
// division instead of being held in registers (the generic loop spilled C
// of them to the stack). The codes' lanes keep the magic number's high
// bits: only their low byte is stored.
template <int C>
SPARQ_INLINE void encode_group_simd(const float* x, const Grid<Simd::W>& g, float* left, V<Simd::W>::I (&codes)[C]) {
  using S = Simd;
  using F = S::F;
  const F bias = reinterpret_cast<F>(g.bias), scale = reinterpret_cast<F>(g.scale), zero = S::set1(0.0f);
  const F levels = reinterpret_cast<F>(g.levels), magic = S::set1(kRoundMagic);
  const F edge = S::set1(std::bit_cast<float>(g.edge_bits[0]));
  F m[C];
  S::Flags near = S::none();
  for (int c = 0; c < C; ++c) {
    const F q = S::min(S::max(S::mul(S::sub(S::load(x + c * S::W), bias), reinterpret_cast<F>(g.inv)), zero), levels);
    m[c] = S::add(q, magic);
    near = S::either(near, S::beyond(q, edge));
  }
  if (g.divide || S::any(near))
    for (int c = 0; c < C; ++c)
      m[c] = S::add(S::min(S::max(S::div(S::sub(S::load(x + c * S::W), bias), scale), zero), levels), magic);
  for (int c = 0; c < C; ++c) {
    if (left) S::store(left + c * S::W, S::sub(S::load(x + c * S::W), S::add(bias, S::mul(scale, S::sub(m[c], magic)))));
    codes[c] = reinterpret_cast<V<S::W>::I>(m[c]);
  }
}
#endif

// Codes (low byte of each lane) of the `C` vectors at x (C * W values), with
// `left` written after the decision, so it may alias x.
template <int W, int C>
SPARQ_INLINE void encode_group(const float* x, const Grid<W>& g, float* left, typename V<W>::I (&codes)[C]) {
#if defined(SPARQ_KERNELS_AVX512) || defined(SPARQ_KERNELS_AVX2)
  if constexpr (W == Simd::W) return encode_group_simd<C>(x, g, left, codes);
#endif
  using F = typename V<W>::F;
  using I = typename V<W>::I;
  F d[C], m[C];
  if constexpr (W == 4) {
    // 4 lanes: the division keeps up (measured), the shortcut's checks cost more.
    for (int c = 0; c < C; ++c) {
      d[c] = load<F>(x + c * W) - g.bias;
      m[c] = (g.constant ? F{} : clamp<W>(d[c] / g.scale, g)) + kRoundMagic;
    }
  } else {
  I near{};
  for (int c = 0; c < C; ++c) {
    d[c] = load<F>(x + c * W) - g.bias;
    const F q = clamp<W>(d[c] * g.inv, g);
    m[c] = q + kRoundMagic;
    const F f = q - (m[c] - kRoundMagic);  // in [-0.5, 0.5], exact
    // |f| > edge, as the sign of edge - |f| on the bit patterns (ordered like
    // the values for non-negative floats).
    near |= g.edge_bits - (reinterpret_cast<I>(f) & 0x7fffffff);
  }
  if (g.divide || any_sign<W>(near))
    for (int c = 0; c < C; ++c) m[c] = clamp<W>(d[c] / g.scale, g) + kRoundMagic;
  }
  for (int c = 0; c < C; ++c) {
    if (left) store(left + c * W, load<F>(x + c * W) - (g.bias + g.scale * (m[c] - kRoundMagic)));
    codes[c] = reinterpret_cast<I>(m[c]) & 0xFF;
  }
}

// The packed bytes of G groups (C = 8 / Bits vectors each) at x. The
// shortcut's check is one branch for all G * C vectors: it waits on the whole
// chain of each vector's arithmetic, so one per group would stall every few
// vectors (it was a third of the loop's time at 4 bits, one check per two
// vectors); when it fails, all of them divide.
template <int W, int Bits, int G>
SPARQ_INLINE void encode_groups(const float* x, const Grid<W>& g, float* left, std::uint8_t* packed) {
  using I = typename V<W>::I;
  constexpr int C = 8 / Bits;
  constexpr auto k = std::make_index_sequence<W>{};
  I c[G * C];
  encode_group<W, G * C>(x, g, left, c);
  for (int j = 0; j < G; ++j) {
    const I* cj = c + j * C;
    I out;
    if constexpr (Bits == 8) out = cj[0];
    if constexpr (Bits == 4) out = pair_up<W>(cj[0], cj[1], 4);
    if constexpr (Bits == 2) out = pair_up<W>(pair_up<W>(cj[0], cj[1], 2), pair_up<W>(cj[2], cj[3], 2), 4);
    store(packed + j * W, low_bytes<W>(out, k));
  }
}

// One loop per code width (a compile-time constant: no per-group branch).
template <int W, int Bits>
SPARQ_INLINE void encode_impl(const float* x, std::size_t n, float scale, float bias, std::uint8_t* packed,
                              float* left) {
  constexpr float levels = static_cast<float>((1 << Bits) - 1);
  constexpr std::size_t group = W * 8 / Bits;  // values per W output bytes
  constexpr int kBlock = Bits;                 // groups per check: 8 vectors (a 128-value row on AVX-512)
  const Grid<W> g(scale, bias, levels);
  std::size_t i = 0;
  for (; i + kBlock * group <= n; i += kBlock * group)
    encode_groups<W, Bits, kBlock>(x + i, g, left ? left + i : nullptr, packed + i * Bits / 8);
  for (; i + group <= n; i += group) encode_groups<W, Bits, 1>(x + i, g, left ? left + i : nullptr, packed + i * Bits / 8);
  if (i == n) return;
  // The ragged end (a whole row when it is shorter than a group, as 32-value
  // rows are at 2 bits): one more group, on a copy padded with the bias. The
  // padding's codes are 0, exact, so they never force the division.
  using F = typename V<W>::F;
  constexpr int C = 8 / Bits;
  const std::size_t rest = n - i;
  float pad[group], pad_left[group];
  std::uint8_t out[16];  // W bytes
  for (int c = 0; c < C; ++c) {
    const std::size_t at = static_cast<std::size_t>(c) * W, k = rest > at ? std::min<std::size_t>(rest - at, W) : 0;
    store(pad + at, k == W ? load<F>(x + i + at) : load_part<W>(x + i + at, k, bias));
  }
  encode_groups<W, Bits, 1>(pad, g, left ? pad_left : nullptr, out);
  store_bytes_part(packed + i * Bits / 8, packed_bytes(rest, Bits), out);
  if (left)
    for (std::size_t at = 0; at < rest; at += W) {
      const F v = load<F>(pad_left + at);
      if (rest - at >= W) store(left + i + at, v);
      else store_part<W>(left + i + at, rest - at, v);
    }
}

// W bytes at p, one per 32-bit lane.
template <int W>
SPARQ_INLINE typename V<W>::I widen_bytes(const std::uint8_t* p) {
  // VPMOVZXBD: GCC 12 made the generic conversion below lane-by-lane inserts.
#if defined(SPARQ_KERNELS_AVX512)
  if constexpr (W == 16)
    return reinterpret_cast<typename V<W>::I>(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#endif
#if defined(SPARQ_KERNELS_AVX2)
  if constexpr (W == 8)
    return reinterpret_cast<typename V<W>::I>(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#endif
  return __builtin_convertvector(load<typename V<W>::B>(p), typename V<W>::I);
}

// The values of the W bytes at packed (W * 8 / bits of them), the first
// `room` of them into out.
template <int W>
SPARQ_INLINE void emit(typename V<W>::I c, float scale, float bias, float* out, std::size_t at, std::size_t room) {
  using F = typename V<W>::F;
  const F f = bias + scale * __builtin_convertvector(c, F);
  if (room == std::numeric_limits<std::size_t>::max() || at + W <= room) store(out + at, f);
  else if (at < room) store_part<W>(out + at, room - at, f);
}

template <int W>
SPARQ_INLINE void decode_group(typename V<W>::I b, float scale, float bias, int bits, float* out, std::size_t room) {
  using I = typename V<W>::I;
  constexpr auto k = std::make_index_sequence<W>{};
  if (bits == 8) return emit<W>(b, scale, bias, out, 0, room);
  // Nibbles in order: low then high nibble of each byte.
  const I lo = b & 0xF, hi = b >> 4;
  const I nib[2] = {zip<W>(lo, hi, 0, k), zip<W>(lo, hi, W / 2, k)};
  if (bits == 4) {
    emit<W>(nib[0], scale, bias, out, 0, room);
    emit<W>(nib[1], scale, bias, out, W, room);
    return;
  }
  for (std::size_t h = 0; h < 2; ++h) {
    const I a = nib[h] & 3, c = nib[h] >> 2;
    emit<W>(zip<W>(a, c, 0, k), scale, bias, out, 2 * h * W, room);
    emit<W>(zip<W>(a, c, W / 2, k), scale, bias, out, (2 * h + 1) * W, room);
  }
}

template <int W>
SPARQ_INLINE void decode_impl(const std::uint8_t* packed, std::size_t n, float scale, float bias, int bits,
                              float* out) {
  const std::size_t group = static_cast<std::size_t>(W * 8 / bits), b8 = static_cast<std::size_t>(bits);
  std::size_t i = 0;
  constexpr std::size_t all = std::numeric_limits<std::size_t>::max();  // whole groups: no room checks
  for (; i + group <= n; i += group) decode_group<W>(widen_bytes<W>(packed + i * b8 / 8), scale, bias, bits, out + i, all);
  if (i == n) return;
  // The ragged end (a whole row when it is shorter than a group): one more
  // group from its bytes, zero-padded, storing only its values.
  std::uint8_t block[16];
  load_bytes_part(packed + i * b8 / 8, packed_bytes(n - i, bits), block);
  decode_group<W>(widen_bytes<W>(block), scale, bias, bits, out + i, n - i);
}

RowRange range(const float* x, float* sum, std::size_t n) { return range_impl<kW>(x, sum, n); }
void encode(const float* x, std::size_t n, float s, float b, int bits, std::uint8_t* p, float* l) {
  if (bits == 8) encode_impl<kW, 8>(x, n, s, b, p, l);
  if (bits == 4) encode_impl<kW, 4>(x, n, s, b, p, l);
  if (bits == 2) encode_impl<kW, 2>(x, n, s, b, p, l);
}
void decode(const std::uint8_t* p, std::size_t n, float s, float b, int bits, float* o) {
  decode_impl<kW>(p, n, s, b, bits, o);
}
