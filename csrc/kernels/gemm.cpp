// Matrix products by MKL, as an XLA FFI handler for XLA's CPU plugin.
//
// The library is the MKL that PyTorch's CPU wheel carries inside
// libtorch_cpu, which exports MKL's BLAS entry points (sgemm_,
// cblas_gemm_bf16bf16f32): the same GEMM that torch.mm runs on the CPU, with
// nothing to install and no second MKL whose symbols would clash with those
// exports. It is looked up in the process, not linked: the torch-free layers
// (and their C++ tests) have no libtorch_cpu, and there the table gives this
// kernel no handler, so XLA's dot runs.
//
// The operands are row-major [B, rows, cols] or [rows, cols]; with
// transpose_lhs the lhs is stored [K, M] (else [M, K]), with transpose_rhs the
// rhs is [N, K] (else [K, N]); the result is f32 [B, M, N] or [M, N]: f32
// operands multiply in f32, bf16 ones accumulate in f32 (as the lowering's
// dot_general asks XLA to). The result is cut into blocks (batch entries,
// else rows or columns) that threads claim one at a time, the calling thread
// and helpers on the plugin's intra-op pool (kernels/parallel.h), each
// running MKL single-threaded.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "xla/ffi/api/ffi.h"

namespace torch_tpu::kernels {

namespace ffi = xla::ffi;

namespace {

// MKL's interfaces (LP64: 32-bit integers), as mkl_blas.h and mkl_cblas.h declare them.
using Sgemm = void (*)(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);
using GemmBf16 = void (*)(int layout, int transa, int transb, int m, int n, int k, float alpha, const uint16_t* a,
                          int lda, const uint16_t* b, int ldb, float beta, float* c, int ldc);
using SetThreadsLocal = int (*)(int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Mkl {
  Sgemm sgemm = nullptr;
  GemmBf16 gemm_bf16 = nullptr;
  SetThreadsLocal set_threads_local = nullptr;
};

const Mkl& mkl() {
  static const Mkl lib = [] {
    Mkl m;
    void* torch_cpu = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
    if (torch_cpu == nullptr) return m;
    m.sgemm = reinterpret_cast<Sgemm>(dlsym(torch_cpu, "sgemm_"));
    m.gemm_bf16 = reinterpret_cast<GemmBf16>(dlsym(torch_cpu, "cblas_gemm_bf16bf16f32"));
    m.set_threads_local = reinterpret_cast<SetThreadsLocal>(dlsym(torch_cpu, "MKL_Set_Num_Threads_Local"));
    if (!m.sgemm || !m.gemm_bf16 || !m.set_threads_local) m = Mkl{};
    return m;
  }();
  return lib;
}

struct Problem {
  int64_t batch, M, N, K;
  bool ta, tb, bf16;
  const void *a, *b;
  float* c;
};

// A block of the result: rows [m0, m1) and columns [n0, n1) of batch
// entries [b0, b1).
struct Block {
  int64_t b0, b1, m0, m1, n0, n1;
};

void multiply(const Problem& p, const Block& k) {
  const Mkl& lib = mkl();
  const int m = int(k.m1 - k.m0), n = int(k.n1 - k.n0), depth = int(p.K), ldc = int(p.N);
  const int lda = int(p.ta ? p.M : p.K), ldb = int(p.tb ? p.K : p.N);
  const int64_t a_at = p.ta ? k.m0 : k.m0 * p.K, b_at = p.tb ? k.n0 * p.K : k.n0;
  const size_t esize = p.bf16 ? 2 : 4;
  for (int64_t i = k.b0; i < k.b1; ++i) {
    const char* a = static_cast<const char*>(p.a) + (i * p.M * p.K + a_at) * esize;
    const char* b = static_cast<const char*>(p.b) + (i * p.K * p.N + b_at) * esize;
    float* c = p.c + i * p.M * p.N + k.m0 * p.N + k.n0;
    if (p.bf16) {
      lib.gemm_bf16(kRowMajor, p.ta ? kTrans : kNoTrans, p.tb ? kTrans : kNoTrans, m, n, depth, 1.0f,
                    reinterpret_cast<const uint16_t*>(a), lda, reinterpret_cast<const uint16_t*>(b), ldb, 0.0f, c,
                    ldc);
    } else {
      // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
      const char ta = p.ta ? 'T' : 'N', tb = p.tb ? 'T' : 'N';
      const float one = 1.0f, zero = 0.0f;
      lib.sgemm(&tb, &ta, &n, &m, &depth, &one, reinterpret_cast<const float*>(b), &ldb,
                reinterpret_cast<const float*>(a), &lda, &zero, c, &ldc);
    }
  }
}

// Blocks of at least this many multiply-adds (~10 us of one core), up to
// kBlocksPerThread per thread of the pool: more blocks than threads, claimed
// as threads come free, keep the cores busy when one of them is slowed (the
// machine is shared) at the cost of packing the shared operand once more per
// block, a small part of a block's work.
constexpr int64_t kMinBlockWork = int64_t(1) << 20;
constexpr int64_t kBlocksPerThread = 4;

std::vector<Block> blocks(const Problem& p, int64_t threads) {
  const int64_t work = p.batch * p.M * p.N * p.K;
  const int64_t wanted = std::clamp<int64_t>(work / kMinBlockWork, 1, kBlocksPerThread * threads);
  std::vector<Block> out;
  if (p.batch >= wanted) {
    for (int64_t i = 0; i < wanted; ++i) out.push_back({p.batch * i / wanted, p.batch * (i + 1) / wanted, 0, p.M, 0, p.N});
    return out;
  }
  // Each matrix cut along its longer side of the result, in multiples of 16.
  const int64_t pieces = (wanted + p.batch - 1) / p.batch;
  const bool rows = p.M >= p.N;
  const int64_t extent = rows ? p.M : p.N;
  const int64_t step = std::max<int64_t>(16, ((extent + pieces - 1) / pieces + 15) / 16 * 16);
  for (int64_t i = 0; i < p.batch; ++i)
    for (int64_t at = 0; at < extent; at += step) {
      int64_t end = std::min(extent, at + step);
      out.push_back(rows ? Block{i, i + 1, at, end, 0, p.N} : Block{i, i + 1, 0, p.M, at, end});
    }
  return out;
}

// MKL single-threaded on this thread while it runs blocks: its OpenMP team
// would compete with the plugin's threads for the same cores.
struct SingleThreaded {
  int previous;
  SingleThreaded() : previous(mkl().set_threads_local(1)) {}
  ~SingleThreaded() { mkl().set_threads_local(previous); }
};

ffi::Error Gemm(ffi::ThreadPool pool, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::ResultBuffer<ffi::F32> out,
                bool transpose_lhs, bool transpose_rhs) {
  auto ld = lhs.dimensions(), rd = rhs.dimensions(), od = out->dimensions();
  const size_t rank = ld.size();
  if ((rank != 2 && rank != 3) || rd.size() != rank || od.size() != rank)
    return ffi::Error::InvalidArgument("gemm: expected operands and result of rank 2 or 3 alike");
  ffi::DataType type = lhs.element_type();
  if (rhs.element_type() != type || (type != ffi::DataType::F32 && type != ffi::DataType::BF16))
    return ffi::Error::InvalidArgument("gemm: the operands must be both f32 or both bf16");
  Problem p;
  const size_t r = rank - 2;
  p.batch = rank == 3 ? ld[0] : 1;
  p.ta = transpose_lhs, p.tb = transpose_rhs, p.bf16 = type == ffi::DataType::BF16;
  p.M = p.ta ? ld[r + 1] : ld[r], p.K = p.ta ? ld[r] : ld[r + 1];
  p.N = p.tb ? rd[r] : rd[r + 1];
  const int64_t rhs_k = p.tb ? rd[r + 1] : rd[r];
  if (rhs_k != p.K || (rank == 3 && (rd[0] != p.batch || od[0] != p.batch)) || od[r] != p.M || od[r + 1] != p.N)
    return ffi::Error::InvalidArgument("gemm: the operands' and the result's shapes do not agree");
  constexpr int64_t kMaxInt = 0x7fffffff;
  if (std::max({p.M, p.N, p.K}) > kMaxInt)
    return ffi::Error::InvalidArgument("gemm: a dimension past MKL's 32-bit indices");
  if (mkl().sgemm == nullptr) return ffi::Error::Internal("gemm: MKL's BLAS is not loaded in this process");
  p.a = lhs.untyped_data(), p.b = rhs.untyped_data(), p.c = out->typed_data();
  if (p.batch * p.M * p.N == 0) return ffi::Error::Success();
  if (p.K == 0) {
    std::memset(p.c, 0, p.batch * p.M * p.N * sizeof(float));
    return ffi::Error::Success();
  }

  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const std::vector<Block> work = blocks(p, threads);
  auto make_worker = [&] {
    return [&p, &work, single = std::make_unique<SingleThreaded>()](int64_t i) { multiply(p, work[i]); };
  };
  // One helper fewer than the pool's threads: the calling thread works too.
  const int64_t items = int64_t(work.size()), helpers = std::min(threads - 1, items - 1);
  run_items(pool, items, helpers > 0 ? (items + helpers - 1) / helpers : items + 1, make_worker);
  return ffi::Error::Success();
}

}  // namespace

bool gemm_library_loaded() { return mkl().sgemm != nullptr; }

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_gemm_host, Gemm,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<bool>("transpose_lhs")
                                  .Attr<bool>("transpose_rhs"));

}  // namespace torch_tpu::kernels
