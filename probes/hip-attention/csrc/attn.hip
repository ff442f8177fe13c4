// Attention forward for the rocmbuild probe: O = softmax(scale * Q K^T [+ causal mask]) V.
//
// Layout: q, k, v, o are contiguous [B, H, S, D] in one dtype (fp32, fp16 or bf16); D is 64 or 128.
// One block of BM threads handles BM query rows of one (batch, head); each thread owns one row.
// Keys and values stream through shared memory in tiles of BN rows, and each row keeps a running
// max / sum (online softmax), so the S x S score matrix never exists. Math is in fp32.
// fp16 and bf16 are handled as raw 16-bit storage with explicit conversions, so the kernel does
// not depend on which HIP version's half/bfloat16 headers are installed.
#include <hip/hip_runtime.h>

#include <cstdint>

namespace {

constexpr int BM = 64;  // query rows per block (= threads per block)
constexpr int BN = 16;  // key/value rows per shared-memory tile

enum Dtype : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

template <int DT> struct Elem;
template <> struct Elem<kF32> {
  using T = float;
  static __device__ float load(T x) { return x; }
  static __device__ T store(float f) { return f; }
};
template <> struct Elem<kF16> {
  using T = uint16_t;
  static __device__ float load(T x) { return static_cast<float>(__builtin_bit_cast(_Float16, x)); }
  static __device__ T store(float f) { return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f)); }
};
template <> struct Elem<kBF16> {
  using T = uint16_t;
  static __device__ float load(T x) { return __builtin_bit_cast(float, static_cast<uint32_t>(x) << 16); }
  static __device__ T store(float f) {
    uint32_t u = __builtin_bit_cast(uint32_t, f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);                     // round to nearest even
    return static_cast<T>(u >> 16);
  }
};

template <int DT, int D, bool CAUSAL>
__global__ __launch_bounds__(BM) void attn_fwd(const typename Elem<DT>::T* __restrict__ q,
                                               const typename Elem<DT>::T* __restrict__ k,
                                               const typename Elem<DT>::T* __restrict__ v,
                                               typename Elem<DT>::T* __restrict__ o, int S,
                                               float scale) {
  using E = Elem<DT>;
  __shared__ float qs[BM][D + 1];  // +1: threads read different rows at the same column
  __shared__ float ks[BN][D];
  __shared__ float vs[BN][D];

  const size_t base = static_cast<size_t>(blockIdx.y) * S * D;
  const int row0 = blockIdx.x * BM;
  const int row = row0 + threadIdx.x;
  const bool active = row < S;

  for (int i = threadIdx.x; i < BM * D; i += BM) {
    const int r = i / D, d = i % D;
    qs[r][d] = (row0 + r < S) ? E::load(q[base + static_cast<size_t>(row0 + r) * D + d]) * scale : 0.f;
  }

  float acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) acc[d] = 0.f;
  float m = -INFINITY, l = 0.f;

  const int kv_end = CAUSAL ? min(S, row0 + BM) : S;
  for (int t0 = 0; t0 < kv_end; t0 += BN) {
    __syncthreads();
    for (int i = threadIdx.x; i < BN * D; i += BM) {
      const int j = i / D, d = i % D;
      const bool ok = t0 + j < S;
      const size_t at = base + static_cast<size_t>(t0 + j) * D + d;
      ks[j][d] = ok ? E::load(k[at]) : 0.f;
      vs[j][d] = ok ? E::load(v[at]) : 0.f;
    }
    __syncthreads();
    if (!active) continue;

    float s[BN];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < BN; ++j) {
      const int key = t0 + j;
      float dot = 0.f;
      for (int d = 0; d < D; ++d) dot += qs[threadIdx.x][d] * ks[j][d];
      const bool masked = key >= S || (CAUSAL && key > row);
      s[j] = masked ? -INFINITY : dot;
      tile_max = fmaxf(tile_max, s[j]);
    }
    if (tile_max == -INFINITY) continue;  // whole tile masked for this row
    const float m_new = fmaxf(m, tile_max);
    const float corr = __expf(m - m_new);  // 0 on the first tile (m = -inf)
    l *= corr;
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] *= corr;
#pragma unroll
    for (int j = 0; j < BN; ++j) {
      const float p = __expf(s[j] - m_new);
      l += p;
      for (int d = 0; d < D; ++d) acc[d] += p * vs[j][d];
    }
    m = m_new;
  }
  if (active) {
    const float inv = l > 0.f ? 1.f / l : 0.f;
    for (int d = 0; d < D; ++d) o[base + static_cast<size_t>(row) * D + d] = E::store(acc[d] * inv);
  }
}

template <int DT, int D, bool CAUSAL>
hipError_t launch(const void* q, const void* k, const void* v, void* o, int B, int H, int S,
                  float scale, hipStream_t stream) {
  using T = typename Elem<DT>::T;
  dim3 grid((S + BM - 1) / BM, B * H);
  hipLaunchKernelGGL((attn_fwd<DT, D, CAUSAL>), grid, dim3(BM), 0, stream,
                     static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                     static_cast<T*>(o), S, scale);
  return hipGetLastError();
}

template <int DT, int D>
hipError_t launch_c(const void* q, const void* k, const void* v, void* o, int B, int H, int S,
                    bool causal, float scale, hipStream_t st) {
  return causal ? launch<DT, D, true>(q, k, v, o, B, H, S, scale, st)
                : launch<DT, D, false>(q, k, v, o, B, H, S, scale, st);
}

template <int DT>
hipError_t launch_d(const void* q, const void* k, const void* v, void* o, int B, int H, int S,
                    int D, bool causal, float scale, hipStream_t st) {
  return D == 64 ? launch_c<DT, 64>(q, k, v, o, B, H, S, causal, scale, st)
                 : launch_c<DT, 128>(q, k, v, o, B, H, S, causal, scale, st);
}

}  // namespace

extern "C" {

// Returns 0 (hipSuccess), a hipError_t code, or -1 for an unsupported dtype / head dim.
int hipattn_forward(const void* q, const void* k, const void* v, void* o, int B, int H, int S,
                    int D, int dtype, int causal, float scale, void* stream) {
  if (D != 64 && D != 128) return -1;
  if (B <= 0 || H <= 0 || S <= 0) return 0;
  auto st = static_cast<hipStream_t>(stream);
  switch (dtype) {
    case kF32: return launch_d<kF32>(q, k, v, o, B, H, S, D, causal != 0, scale, st);
    case kF16: return launch_d<kF16>(q, k, v, o, B, H, S, D, causal != 0, scale, st);
    case kBF16: return launch_d<kBF16>(q, k, v, o, B, H, S, D, causal != 0, scale, st);
    default: return -1;
  }
}

const char* hipattn_error_string(int code) {
  return hipGetErrorString(static_cast<hipError_t>(code));
}

// Number of visible GPUs, or -(hip error code) when the runtime reports an error (no GPU: -100).
int hipattn_device_count(void) {
  int n = 0;
  hipError_t e = hipGetDeviceCount(&n);
  return e == hipSuccess ? n : -static_cast<int>(e);
}

int hipattn_synchronize(void) { return static_cast<int>(hipDeviceSynchronize()); }

}  // extern "C"
