// cuBLASLt GEMM for the CUDA ops (cublaslt_gemm.h): the row-major call mapped onto cuBLASLt's
// column-major one (Cᵀ = op(B)ᵀ · op(A)ᵀ, so A' = B and B' = A with their own transposes), one
// handle per device, the heuristic's first algorithm cached per shape (per shape but m for a
// row-invariant call; per shape and bucket of m for a row-invariant call of few rows: the fastest
// of the heuristic's and cuBLASLt's configurable algorithms, without split-K, that give the
// row-invariant algorithm's bits, each choice logged for gemm_choices), and each call's
// descriptors kept with its algorithm for the calls like it.
#include "gpu/ops/cuda/cublaslt_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/core/cuda/check.h"
#include "gpu/core/host_waits.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

constexpr int max_devices = 64;

/// "<op>: <call>: CUBLAS_STATUS_... (text)".
status lt_status(std::string_view op, const char* call, cublasStatus_t s) {
  const status_code code = s == CUBLAS_STATUS_ALLOC_FAILED ? status_code::out_of_memory
                           : s == CUBLAS_STATUS_NOT_SUPPORTED ? status_code::unsupported
                                                              : status_code::device_error;
  return {code, std::string(op) + ": " + call + ": " + cublasLtGetStatusName(s) + " (" + cublasLtGetStatusString(s) + ")"};
}

/// Calls fn(args...); a failure returns lt_status naming `op` and fn.
#define TANDEM_LT_CALL(op, fn, ...)                                                              \
  do {                                                                                           \
    const cublasStatus_t tandem_lt_status_ = fn(__VA_ARGS__);                                    \
    if (tandem_lt_status_ != CUBLAS_STATUS_SUCCESS) return lt_status(op, #fn, tandem_lt_status_); \
  } while (0)

/// One handle per device, created on first use (the device is current then).
struct handle_slot {
  std::once_flag once;
  cublasLtHandle_t handle = nullptr;
  cublasStatus_t error = CUBLAS_STATUS_SUCCESS;
};

std::array<handle_slot, max_devices>& handle_slots() {
  static std::array<handle_slot, max_devices> slots;  // never destroyed before the handles' users
  return slots;
}

result<cublasLtHandle_t> handle_for(std::string_view op, int index) {
  if (index < 0 || index >= max_devices)
    return status{status_code::unsupported, std::string(op) + ": cuda:" + std::to_string(index) +
                                                " is beyond the " + std::to_string(max_devices) + " devices supported"};
  handle_slot& slot = handle_slots()[static_cast<std::size_t>(index)];
  std::call_once(slot.once, [&slot] { slot.error = cublasLtCreate(&slot.handle); });
  if (slot.error != CUBLAS_STATUS_SUCCESS) return lt_status(op, "cublasLtCreate", slot.error);
  return slot.handle;
}

cudaDataType_t cuda_type(dtype t) { return t == dtype::bfloat16 ? CUDA_R_16BF : CUDA_R_32F; }

/// The largest power of two (at most 256) dividing the address.
std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align != 0) align >>= 1;
  return align;
}

/// What the algorithm choice depends on.
struct plan_key {
  int device;
  int ab, c;
  bool ta, tb, accumulate;  // m is row_invariant_m for a row-invariant call
  std::int64_t m, n, k, lda, ldb, ldc;
  std::uint32_t align_a, align_b, align_c;
  bool operator==(const plan_key&) const = default;
};

struct plan_key_hash {
  std::size_t operator()(const plan_key& k) const {
    std::size_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(static_cast<std::uint64_t>(k.device));
    mix(static_cast<std::uint64_t>(k.ab) << 8 | static_cast<std::uint64_t>(k.c));
    mix(static_cast<std::uint64_t>(k.ta) << 2 | static_cast<std::uint64_t>(k.tb) << 1 | k.accumulate);
    for (std::int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc}) mix(static_cast<std::uint64_t>(v));
    mix(static_cast<std::uint64_t>(k.align_a) << 32 | k.align_b);
    mix(k.align_c);
    return h;
  }
};

/// The algorithms found so far. Bounded: past the cap a shape is looked up on every call (the
/// heuristic gives the same answer, only slower).
class plan_cache {
 public:
  bool find(const plan_key& key, cublasLtMatmulAlgo_t& algo) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    algo = it->second;
    return true;
  }
  void insert(const plan_key& key, const cublasLtMatmulAlgo_t& algo) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (map_.size() < cap) map_.emplace(key, algo);
  }

 private:
  static constexpr std::size_t cap = 1 << 16;
  std::mutex mutex_;
  std::unordered_map<plan_key, cublasLtMatmulAlgo_t, plan_key_hash> map_;
};

plan_cache& plans() {
  static plan_cache* cache = new plan_cache;  // leaked: outlives every thread's last GEMM
  return *cache;
}

/// The key's m of a row-invariant call (no real call has it).
constexpr std::int64_t row_invariant_m = -1;
/// The most alignment of A and C a row-invariant call's algorithm may assume (what 16-byte vector
/// loads and the tensor-memory accelerator need; a row of a batch keeps it when its row pitch does).
constexpr std::uint32_t row_invariant_alignment = 16;

/// Descriptors of one call, destroyed with it (cublasLtMatmul reads them while enqueueing only).
/// query_b and query_c are B' and C at row_invariant_rows rows, for a row-invariant call's heuristic.
struct descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, query_b = nullptr, query_c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  descriptors() = default;
  descriptors(const descriptors&) = delete;
  descriptors& operator=(const descriptors&) = delete;
  ~descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t l : {query_c, query_b, c, b, a})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (matmul) cublasLtMatmulDescDestroy(matmul);
  }
};

/// A call's descriptors and algorithm, kept for the calls like it (read-only once cached:
/// cublasLtMatmul only reads them, from any thread).
struct call_plan {
  descriptors d;
  cublasLtMatmulAlgo_t algo{};
};

/// What a call's descriptors and algorithm depend on: its plan key, its own m, and whether it is
/// row-invariant (the same shape may come both ways).
struct call_key {
  plan_key plan;
  std::int64_t m;
  bool row_invariant;
  std::int64_t batch, stride_a, stride_b, stride_c;  // 1, 0, 0, 0 unbatched
  bool operator==(const call_key&) const = default;
};

struct call_key_hash {
  std::size_t operator()(const call_key& k) const {
    std::size_t h = plan_key_hash{}(k.plan) ^ (static_cast<std::size_t>(k.m) * 0x9E3779B97F4A7C15ull) ^
                    static_cast<std::size_t>(k.row_invariant);
    for (std::int64_t v : {k.batch, k.stride_a, k.stride_b, k.stride_c})
      h = (h ^ static_cast<std::size_t>(v)) * 1099511628211ull;
    return h;
  }
};

/// The calls seen so far. Bounded like plan_cache: past the cap a call makes its descriptors again.
class call_cache {
 public:
  std::shared_ptr<const call_plan> find(const call_key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void insert(const call_key& key, std::shared_ptr<const call_plan> plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (map_.size() < cap) map_.emplace(key, std::move(plan));
  }

 private:
  static constexpr std::size_t cap = 1 << 16;
  std::mutex mutex_;
  std::unordered_map<call_key, std::shared_ptr<const call_plan>, call_key_hash> map_;
};

call_cache& calls() {
  static call_cache* cache = new call_cache;  // leaked, as plans()
  return *cache;
}

std::string shape_text(const gemm_operands& g, dtype ab, dtype c) {
  return std::string(g.transpose_a ? "Aᵀ" : "A") + " · " + (g.transpose_b ? "Bᵀ" : "B") + " with m " +
         std::to_string(g.m) + ", n " + std::to_string(g.n) + ", k " + std::to_string(g.k) + ", " +
         std::string(to_string(ab)) + " -> " + std::string(to_string(c));
}


/// A preference for the heuristic: the workspace every call passes, the reduction schemes allowed,
/// and the alignments of the key (A' = B, B' = A).
status make_preference(std::string_view op, cublasLtMatmulPreference_t& out, std::uint32_t schemes, const plan_key& key) {
  TANDEM_LT_CALL(op, cublasLtMatmulPreferenceCreate, &out);
  const std::uint64_t bytes = gemm_workspace_bytes;
  const std::uint32_t align_a = key.align_b, align_b = key.align_a, align_c = key.align_c;
  TANDEM_LT_CALL(op, cublasLtMatmulPreferenceSetAttribute, out, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes));
  TANDEM_LT_CALL(op, cublasLtMatmulPreferenceSetAttribute, out, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                 sizeof(schemes));
  TANDEM_LT_CALL(op, cublasLtMatmulPreferenceSetAttribute, out, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                 sizeof(align_a));
  TANDEM_LT_CALL(op, cublasLtMatmulPreferenceSetAttribute, out, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                 sizeof(align_b));
  TANDEM_LT_CALL(op, cublasLtMatmulPreferenceSetAttribute, out, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                 sizeof(align_c));
  TANDEM_LT_CALL(op, cublasLtMatmulPreferenceSetAttribute, out, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                 sizeof(align_c));
  return status::ok();
}

// ---------------------------------------------------------------------------------------------
// Row-invariant calls of few rows (a decode step's): the algorithm chosen at row_invariant_rows
// rows tiles a few rows into a handful of blocks and leaves most multiprocessors idle, and what
// the heuristic offers at m's bucket (m rounded up to a power of two) once split-K is off may be
// little better (k 12288 -> n 1536 at 256 rows on an H200: a 16x16-tile wmma kernel streaming
// the weight at ~190 GB/s). For m up to small_rows_limit the candidates are therefore the
// heuristic's algorithms for the bucket and, after them, cuBLASLt's configurable algorithms for
// the call's types at each tile and stage count they list (configured_algos), all without
// split-K: a split sums k in another order than the row-invariant algorithm does. A candidate
// must pass cublasLtMatmulAlgoCheck at the call's descriptors and at the probe's, within the
// workspace and the alignments of the call's pointers; at most max_enumerated_probes of the
// configured ones are then probed per shape and bucket (those failing the checks do not count).
// The probe runs each on random operands of the call's k at three row counts of the bucket
// (probe_rows); those that give the very bits of the row-invariant algorithm at every one of them
// (every element summed in the same order, whatever m), and the row-invariant
// algorithm itself, are timed at the call's own shape and operands, and the fastest is kept for
// the bucket (a later one only when more than timing_margin faster: the heuristic's order
// breaks ties and noise; its order is an estimate, so the first algorithm that gives the bits
// need not be the fastest). Rows stay the same bits whatever the batch: what the generate engine
// samples, the train engine scores alike. The choice is made once per shape and bucket, on the
// first call, which must not be in a stream capture (the probe and the timing wait for the
// device), and is logged for gemm_choices().

constexpr std::int64_t small_rows_limit = 1024;
constexpr std::int64_t small_rows_floor = 16;
/// Columns of the probe: enough for several tiles of any algorithm; an element's sum over k does
/// not depend on how many columns there are.
constexpr std::int64_t probe_columns = 2048;
/// Candidates asked of the heuristic.
constexpr int probe_candidates = 32;
/// Configured algorithms probed per shape and bucket, beyond the heuristic's: each probe is a
/// product of the bucket's rows and probe_columns columns and a wait for it.
constexpr int max_enumerated_probes = 256;
/// Algorithm ids asked of cublasLtMatmulAlgoGetIds: room for every one it lists for a set of types.
constexpr int max_algo_ids = 1024;
/// Timed runs, back to back, of each algorithm that gives the bits (see fastest_algo).
constexpr int timed_runs = 5;
/// How much faster than an earlier algorithm a later one must run to be chosen instead.
constexpr float timing_margin = 0.03f;
/// A candidate whose first timed run takes longer than this many times the best time per run so
/// far is not timed further (it cannot win; a slow configuration costs two runs, not eight).
constexpr float timing_cutoff = 2.f;

/// The row counts a bucket's candidates are probed at: the bucket's own (first: the reference's
/// bits are taken there), the fewest rows of the bucket (1 for the first bucket) and an odd count
/// between. An algorithm's bits per row are checked across the bucket, not at one m: one whose
/// tiling or order changes with m (a kernel the library picks per call, a stream-K schedule) shows
/// it at one of them, and, chosen by timing, it would give one run's bits and not the next's.
std::vector<std::int64_t> probe_rows(std::int64_t bucket) {
  const std::int64_t fewest = bucket == small_rows_floor ? 1 : bucket / 2 + 1;
  return {bucket, fewest, ((fewest + bucket) / 2) | 1};
}

/// B' [k, rows] and C [n, rows] (column-major) of the probe at one row count, destroyed with it.
struct probe_layouts {
  std::int64_t rows = 0;
  cublasLtMatrixLayout_t b = nullptr, c = nullptr;
  probe_layouts() = default;
  probe_layouts(probe_layouts&& o) noexcept : rows(o.rows), b(std::exchange(o.b, nullptr)), c(std::exchange(o.c, nullptr)) {}
  probe_layouts(const probe_layouts&) = delete;
  probe_layouts& operator=(const probe_layouts&) = delete;
  ~probe_layouts() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
  }
};

std::int64_t rows_bucket(std::int64_t m) {
  std::int64_t b = small_rows_floor;
  while (b < m) b <<= 1;
  return b;
}

/// `count` values of `type` from a fixed xorshift stream: uniform in [-1, 1) times 2^e, e uniform
/// in [-6, 6] (bfloat16: the float32's upper half). The spread of magnitudes makes a product's
/// partial sums round at different bits in another summation order, so a candidate that sums k
/// otherwise shows it in the output even after its rounding to bfloat16.
std::vector<unsigned char> random_values(std::int64_t count, dtype type, std::uint64_t seed) {
  std::vector<unsigned char> out(static_cast<std::size_t>(count) * size_of(type));
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::int64_t i = 0; i < count; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const int e = static_cast<int>(x & 15) % 13 - 6;
    const float v = std::ldexp(static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-52 - 1.0), e);
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (type == dtype::bfloat16) {
      const auto half = static_cast<std::uint16_t>(bits >> 16);
      std::memcpy(out.data() + i * 2, &half, 2);
    } else {
      std::memcpy(out.data() + i * 4, &bits, 4);
    }
  }
  return out;
}

/// Device memory of the probe or the timing, given back on the stream when it goes.
struct probe_buffer {
  void* p = nullptr;
  cudaStream_t stream = nullptr;
  probe_buffer() = default;
  probe_buffer(const probe_buffer&) = delete;
  probe_buffer& operator=(const probe_buffer&) = delete;
  ~probe_buffer() {
    if (p) cudaFreeAsync(p, stream);
  }
};

/// The two events around the timed runs, destroyed with them.
struct timing_events {
  cudaEvent_t start = nullptr, stop = nullptr;
  timing_events() = default;
  timing_events(const timing_events&) = delete;
  timing_events& operator=(const timing_events&) = delete;
  ~timing_events() {
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
  }
};

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) { return std::memcmp(&x, &y, sizeof(x)) == 0; }

bool among(const std::vector<cublasLtMatmulAlgo_t>& algos, const cublasLtMatmulAlgo_t& algo) {
  return std::any_of(algos.begin(), algos.end(), [&algo](const cublasLtMatmulAlgo_t& x) { return same_algo(x, algo); });
}

/// Sets `algo` to sum k in one part (no split-K, no reduction); false when it does not take that.
bool without_split_k(cublasLtMatmulAlgo_t& algo) {
  const std::int32_t one = 1;
  const std::uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
  return cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof(one)) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none, sizeof(none)) ==
             CUBLAS_STATUS_SUCCESS;
}

/// Whether `algo` asks no more alignment of the pointers than the key's (A' = B, B' = A). The
/// heuristic's algorithms are chosen for the key's alignments; a configured one says its own.
bool aligned_for(const cublasLtMatmulAlgo_t& algo, const plan_key& key) {
  const std::pair<cublasLtMatmulAlgoCapAttributes_t, std::uint32_t> needs[] = {
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES, key.align_b},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES, key.align_a},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES, key.align_c},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES, key.align_c}};
  for (const auto& [attr, have] : needs) {
    std::uint32_t need = 0;
    std::size_t written = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &need, sizeof(need), &written) != CUBLAS_STATUS_SUCCESS ||
        need > have)
      return false;
  }
  return true;
}

/// The ids an algorithm lists for a capability that is an array of uint32 (CUBLASLT_ALGO_CAP_TILE_IDS,
/// _STAGES_IDS); none when it lists none.
std::vector<std::uint32_t> listed_ids(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS) return {};
  std::vector<std::uint32_t> ids(bytes / sizeof(std::uint32_t));
  if (ids.empty() || cublasLtMatmulAlgoCapGetAttribute(&algo, attr, ids.data(), ids.size() * sizeof(std::uint32_t),
                                                       &bytes) != CUBLAS_STATUS_SUCCESS)
    return {};
  ids.resize(std::min(ids.size(), bytes / sizeof(std::uint32_t)));
  return ids;
}

/// The lists' elements in turn: the first of each list, then the second of each, and so on.
std::vector<cublasLtMatmulAlgo_t> in_turn(const std::vector<std::vector<cublasLtMatmulAlgo_t>>& lists) {
  std::vector<cublasLtMatmulAlgo_t> out;
  for (std::size_t i = 0;; ++i) {
    const std::size_t before = out.size();
    for (const std::vector<cublasLtMatmulAlgo_t>& list : lists)
      if (i < list.size()) out.push_back(list[i]);
    if (out.size() == before) return out;
  }
}

/// cuBLASLt's configurable algorithms for the call's types (cublasLtMatmulAlgoGetIds), each at
/// every tile and stage count it lists (CUBLASLT_ALGO_CAP_TILE_IDS, _STAGES_IDS), without split-K,
/// in the order they are probed: the algorithms in turn, and within each its tiles in turn (in the
/// order listed), each tile's stage counts from the last listed on (cuBLASLt numbers the deeper
/// and the automatic ones later), so that max_enumerated_probes reach every algorithm and tile
/// before a second stage count of any. A tile left undefined is the library's to pick at each
/// call, which a probe at one m cannot vouch for at another: skipped; an undefined stage count
/// only where no other is listed. CTA swizzling, the custom option and the cluster shape
/// (CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, for which cublasLt.h lists no capability) stay at their
/// defaults (0, 0, automatic). Unchecked: each is checked before it is probed. None when cuBLASLt
/// lists no algorithm for the types (the heuristic's remain).
std::vector<cublasLtMatmulAlgo_t> configured_algos(cublasLtHandle_t handle, dtype ab, dtype c_type) {
  const cudaDataType_t t_ab = cuda_type(ab), t_c = cuda_type(c_type);
  std::vector<int> ids(max_algo_ids);
  int id_count = 0;
  if (cublasLtMatmulAlgoGetIds(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, t_ab, t_ab, t_c, t_c, max_algo_ids, ids.data(),
                               &id_count) != CUBLAS_STATUS_SUCCESS)
    return {};
  std::vector<std::vector<cublasLtMatmulAlgo_t>> per_algo;
  for (int i = 0; i < std::min(id_count, max_algo_ids); ++i) {
    cublasLtMatmulAlgo_t base;
    if (cublasLtMatmulAlgoInit(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, t_ab, t_ab, t_c, t_c,
                               ids[static_cast<std::size_t>(i)], &base) != CUBLAS_STATUS_SUCCESS ||
        !without_split_k(base))
      continue;
    std::vector<std::uint32_t> stages = listed_ids(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    std::erase(stages, static_cast<std::uint32_t>(CUBLASLT_MATMUL_STAGES_UNDEFINED));
    if (stages.empty()) stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
    std::vector<std::vector<cublasLtMatmulAlgo_t>> per_tile;
    for (const std::uint32_t tile : listed_ids(base, CUBLASLT_ALGO_CAP_TILE_IDS)) {
      if (tile == CUBLASLT_MATMUL_TILE_UNDEFINED) continue;
      std::vector<cublasLtMatmulAlgo_t> list;
      for (auto s = stages.rbegin(); s != stages.rend(); ++s) {
        cublasLtMatmulAlgo_t algo = base;
        if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile)) ==
                CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &*s, sizeof(*s)) ==
                CUBLAS_STATUS_SUCCESS)
          list.push_back(algo);
      }
      per_tile.push_back(std::move(list));
    }
    per_algo.push_back(in_turn(per_tile));
  }
  return in_turn(per_algo);
}

/// cuBLASLt's names of its tiles and stage counts (cublasLtMatmulTile_t: rows x columns of its
/// column-major C, n x m here; cublasLtMatmulStages_t), the first of them; "" where it has none.
constexpr std::array<std::string_view, 36> tile_names = {
    "undefined", "8x8",    "8x16",    "16x8",    "8x32",    "16x16",   "32x8",    "8x64",    "16x32",
    "32x16",     "64x8",   "32x32",   "32x64",   "64x32",   "32x128",  "64x64",   "128x32",  "64x128",
    "128x64",    "64x256", "128x128", "256x64",  "64x512",  "128x256", "256x128", "512x64",  "64x96",
    "96x64",     "96x128", "128x160", "160x128", "192x128", "128x192", "128x96",  "32x256",  "256x32"};
constexpr std::array<std::string_view, 39> stage_names = {
    "undefined", "16x1",  "16x2",   "16x3",   "16x4",   "16x5",    "16x6",    "32x1",    "32x2",     "32x3",
    "32x4",      "32x5",  "32x6",   "64x1",   "64x2",   "64x3",    "64x4",    "64x5",    "64x6",     "128x1",
    "128x2",     "128x3", "128x4",  "128x5",  "128x6",  "32x10",   "8x4",     "16x10",   "8x5",      "",
    "",          "8x3",   "8xAUTO", "16xAUTO", "32xAUTO", "64xAUTO", "128xAUTO", "256xAUTO", "768xAUTO"};

template <std::size_t N>
std::string id_name(std::uint32_t id, const std::array<std::string_view, N>& names) {
  return id < N && !names[id].empty() ? std::string(names[id]) : std::to_string(id);
}

/// "algo <id>, tile <name or id>, stages <name or id>" of a configured algorithm, then its
/// cluster shape, CTA swizzling and custom option where not 0, as cuBLASLt reads them back.
std::string algo_text(const cublasLtMatmulAlgo_t& algo) {
  std::int32_t id = -1;
  std::uint32_t tile = 0, stages = 0, swizzle = 0, custom = 0;
  std::uint16_t cluster = 0;
  std::size_t written = 0;
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written);
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &written);
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &written);
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster),
                                             &written);
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof(swizzle),
                                             &written);
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom),
                                             &written);
  std::string text = "algo " + std::to_string(id) + ", tile " + id_name(tile, tile_names) + ", stages " +
                     id_name(stages, stage_names);
  if (cluster != 0) text += ", cluster " + std::to_string(cluster);
  if (swizzle != 0) text += ", swizzle " + std::to_string(swizzle);
  if (custom != 0) text += ", custom option " + std::to_string(custom);
  return text;
}

/// The choices made so far (gemm_choices).
struct choice_log {
  std::mutex mutex;
  std::vector<gemm_choice> choices;
};

choice_log& choices() {
  static choice_log* log = new choice_log;  // leaked, as plans()
  return *log;
}

/// After a launch that failed: its own error (a launch refused, not sticky) is cleared, so that
/// the next op does not take it for its own; an error the context keeps (sticky: a fault of an
/// earlier kernel) is returned.
status passed_over(cudaStream_t stream) {
  (void)cudaGetLastError();
  const host_wait waiting;
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return status::ok();
}

/// The algorithm kept for a bucket and the times per run at the call's shape, in microseconds
/// (0 when not timed).
struct timed_algo {
  cublasLtMatmulAlgo_t algo{};
  double us = 0;
  double reference_us = 0;
};

/// Of `algos`, in order of preference and `reference` among them, the one that runs the call `g`
/// (its operands, m, n and k, its descriptors `real`) fastest on the device, with its time and
/// the reference's. An accumulating call runs into a C of its own (the call's C must keep its
/// values); any other writes the call's C, which the call then overwrites. An algorithm that does
/// not launch is passed over (the reference is kept when none does); one whose first timed run
/// is past timing_cutoff is not timed further.
result<timed_algo> fastest_algo(cublasLtHandle_t handle, const gemm_operands& g, dtype c_type, const descriptors& real,
                                const std::vector<cublasLtMatmulAlgo_t>& algos, const cublasLtMatmulAlgo_t& reference,
                                void* workspace, cudaStream_t stream) {
  timed_algo best{reference, 0, 0};
  if (algos.size() == 1) return best;
  probe_buffer scratch;
  scratch.stream = stream;
  void* out = g.c;
  if (g.accumulate) {  // the call's C layout, from a 256-byte aligned start
    const std::size_t bytes = static_cast<std::size_t>((g.m - 1) * g.ldc + g.n) * size_of(c_type);
    TANDEM_CUDA_CHECK(cudaMallocAsync(&scratch.p, bytes, stream));
    TANDEM_CUDA_CHECK(cudaMemsetAsync(scratch.p, 0, bytes, stream));
    out = scratch.p;
  }
  timing_events events;
  TANDEM_CUDA_CHECK(cudaEventCreate(&events.start));
  TANDEM_CUDA_CHECK(cudaEventCreate(&events.stop));
  const float alpha = 1.f, beta = g.accumulate ? 1.f : 0.f;
  auto launch = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(handle, real.matmul, &alpha, g.b, real.a, g.a, real.b, &beta, out, real.c, out, real.c, &algo,
                          workspace, gemm_workspace_bytes, stream) == CUBLAS_STATUS_SUCCESS;
  };
  // The elapsed time between the events, once the second has passed.
  auto elapsed_ms = [&events](float& ms) -> status {
    {
      const host_wait waiting;
      TANDEM_CUDA_CHECK(cudaEventSynchronize(events.stop));
    }
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    return status::ok();
  };
  float best_ms = std::numeric_limits<float>::infinity();  // per run
  for (const cublasLtMatmulAlgo_t& algo : algos) {
    const bool is_reference = same_algo(algo, reference);
    // One untimed run (it loads the kernel) and one timed alone, which a candidate past
    // timing_cutoff ends with; then one untimed run that the timed_runs follow back to back.
    bool launched = launch(algo);
    if (launched) {
      TANDEM_CUDA_CHECK(cudaEventRecord(events.start, stream));
      launched = launch(algo);
    }
    if (launched) {
      TANDEM_CUDA_CHECK(cudaEventRecord(events.stop, stream));
      float first_ms = 0;
      if (auto st = elapsed_ms(first_ms); !st) return st;
      if (!is_reference && first_ms > timing_cutoff * best_ms) continue;
      launched = launch(algo);
    }
    if (launched) TANDEM_CUDA_CHECK(cudaEventRecord(events.start, stream));
    for (int i = 0; launched && i < timed_runs; ++i) launched = launch(algo);
    if (!launched) {
      if (auto st = passed_over(stream); !st) return st;
      continue;
    }
    TANDEM_CUDA_CHECK(cudaEventRecord(events.stop, stream));
    float ms = 0;
    if (auto st = elapsed_ms(ms); !st) return st;
    ms /= timed_runs;
    if (is_reference) best.reference_us = 1e3 * ms;
    if (ms < best_ms * (1 - timing_margin)) best.algo = algo, best_ms = ms;
  }
  if (best_ms < std::numeric_limits<float>::infinity()) best.us = 1e3 * best_ms;
  return best;
}

/// Whether `algo` runs the product of these descriptors (C and D alike) within the workspace.
bool runs(cublasLtHandle_t handle, cublasLtMatmulDesc_t matmul, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
          cublasLtMatrixLayout_t c, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t checked{};
  return cublasLtMatmulAlgoCheck(handle, matmul, a, b, c, c, &algo, &checked) == CUBLAS_STATUS_SUCCESS &&
         checked.workspaceSize <= gemm_workspace_bytes;
}

/// Whether `algo` runs the call of `d` within the workspace.
bool runs(cublasLtHandle_t handle, const descriptors& d, const cublasLtMatmulAlgo_t& algo) {
  return runs(handle, d.matmul, d.a, d.b, d.c, algo);
}

/// The algorithm for row-invariant calls of `g`'s shape at `bucket` rows (see above); `reference`
/// is the row-invariant algorithm, `real` the call's own descriptors (a candidate must run there).
/// The choice is logged.
result<cublasLtMatmulAlgo_t> small_rows_algo(std::string_view op, cublasLtHandle_t handle, const gemm_operands& g, dtype ab,
                                             dtype c_type, const plan_key& key, const descriptors& real,
                                             const cublasLtMatmulAlgo_t& reference, std::int64_t bucket, void* workspace,
                                             cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TANDEM_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    return status{status_code::invalid_argument, std::string(op) + ": gemm: " + shape_text(g, ab, c_type) +
                                                     " has no algorithm yet at the " + std::to_string(bucket) +
                                                     "-row bucket: run it once outside the stream capture (the "
                                                     "choice waits for the device)"};
  const std::int64_t n = std::min(g.n, probe_columns), k = g.k;
  // The probe's operands, contiguous: A [bucket, k], B [k, n] (or [n, k]), C [bucket, n]; the
  // products are taken at each of probe_rows(bucket) rows over A's and C's first rows.
  descriptors q;
  const cublasOperation_t op_a = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  const std::int64_t ld_b = g.transpose_b ? k : n;
  TANDEM_LT_CALL(op, cublasLtMatmulDescCreate, &q.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  TANDEM_LT_CALL(op, cublasLtMatmulDescSetAttribute, q.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
  TANDEM_LT_CALL(op, cublasLtMatmulDescSetAttribute, q.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
  TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &q.a, cuda_type(ab), static_cast<std::uint64_t>(g.transpose_b ? k : n),
                 static_cast<std::uint64_t>(g.transpose_b ? n : k), ld_b);
  const std::vector<std::int64_t> row_counts = probe_rows(bucket);
  std::vector<probe_layouts> at(row_counts.size());
  for (std::size_t i = 0; i < row_counts.size(); ++i) {
    at[i].rows = row_counts[i];
    TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &at[i].b, cuda_type(ab), static_cast<std::uint64_t>(k),
                   static_cast<std::uint64_t>(at[i].rows), k);
    TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &at[i].c, cuda_type(c_type), static_cast<std::uint64_t>(n),
                   static_cast<std::uint64_t>(at[i].rows), n);
  }
  const std::uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
  if (auto st = make_preference(op, q.preference, none, key); !st) return st;
  // The heuristic at the bucket's rows and the call's real n (the probe's n only sizes the check).
  descriptors h;
  TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &h.b, cuda_type(ab), static_cast<std::uint64_t>(k),
                 static_cast<std::uint64_t>(bucket), g.lda);
  TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &h.c, cuda_type(c_type), static_cast<std::uint64_t>(g.n),
                 static_cast<std::uint64_t>(bucket), g.ldc);
  std::array<cublasLtMatmulHeuristicResult_t, probe_candidates> found{};
  int count = 0;
  TANDEM_LT_CALL(op, cublasLtMatmulAlgoGetHeuristic, handle, real.matmul, real.a, h.b, h.c, h.c, q.preference,
                 probe_candidates, found.data(), &count);
  const std::vector<cublasLtMatmulAlgo_t> configured = configured_algos(handle, ab, c_type);

  const std::size_t a_bytes = static_cast<std::size_t>(bucket * k) * size_of(ab);
  const std::size_t b_bytes = static_cast<std::size_t>(n * k) * size_of(ab);
  const std::size_t c_bytes = static_cast<std::size_t>(bucket * n) * size_of(c_type);
  probe_buffer a, b, c;
  for (probe_buffer* p : {&a, &b, &c}) p->stream = stream;
  TANDEM_CUDA_CHECK(cudaMallocAsync(&a.p, a_bytes, stream));
  TANDEM_CUDA_CHECK(cudaMallocAsync(&b.p, b_bytes, stream));
  TANDEM_CUDA_CHECK(cudaMallocAsync(&c.p, c_bytes, stream));
  const auto host_a = random_values(bucket * k, ab, 1), host_b = random_values(n * k, ab, 2);
  const auto host_c = random_values(bucket * n, c_type, 3);  // C's start, for an accumulating call
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(a.p, host_a.data(), a_bytes, cudaMemcpyHostToDevice, stream));
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(b.p, host_b.data(), b_bytes, cudaMemcpyHostToDevice, stream));
  const float alpha = 1.f, beta = g.accumulate ? 1.f : 0.f;
  // C's first rows of `algo` on the probe at `rows` rows, read back; cublasLtMatmul's status (an
  // algorithm that does not launch is passed over: its error cleared, a sticky one returned).
  auto run = [&](const cublasLtMatmulAlgo_t& algo, const probe_layouts& rows,
                 std::vector<unsigned char>& out) -> result<cublasStatus_t> {
    const std::size_t bytes = static_cast<std::size_t>(rows.rows * n) * size_of(c_type);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(c.p, host_c.data(), bytes, cudaMemcpyHostToDevice, stream));
    const cublasStatus_t launched = cublasLtMatmul(handle, q.matmul, &alpha, b.p, q.a, a.p, rows.b, &beta, c.p, rows.c,
                                                   c.p, rows.c, &algo, workspace, gemm_workspace_bytes, stream);
    if (launched != CUBLAS_STATUS_SUCCESS) {
      if (auto st = passed_over(stream); !st) return st;
      return launched;
    }
    out.resize(bytes);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(out.data(), c.p, bytes, cudaMemcpyDeviceToHost, stream));
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
    return CUBLAS_STATUS_SUCCESS;
  };
  // The reference's rows at the bucket's row count (at[0]): what every candidate must give, at
  // every row count, in the rows it computes.
  std::vector<unsigned char> want, got;
  auto wanted = run(reference, at[0], want);
  if (!wanted) return wanted.error();
  if (*wanted != CUBLAS_STATUS_SUCCESS) return lt_status(op, "cublasLtMatmul", *wanted);
  // Whether `algo` runs the call and the probe at each row count, within the workspace and the
  // pointers' alignments.
  auto fits = [&](const cublasLtMatmulAlgo_t& algo) {
    if (!aligned_for(algo, key) || !runs(handle, real, algo)) return false;
    return std::all_of(at.begin(), at.end(),
                       [&](const probe_layouts& rows) { return runs(handle, q.matmul, q.a, rows.b, rows.c, algo); });
  };
  // Whether `algo`'s rows equal the reference's at every row count (a launch refused: not equal).
  auto gives_the_bits = [&](const cublasLtMatmulAlgo_t& algo) -> result<bool> {
    for (const probe_layouts& rows : at) {
      auto ran = run(algo, rows, got);
      if (!ran) return ran.error();
      if (*ran != CUBLAS_STATUS_SUCCESS || !std::equal(got.begin(), got.end(), want.begin())) return false;
    }
    return true;
  };
  // The candidates that give the reference's bits, in order of preference: the heuristic's, the
  // reference among them (else after them), then the configured ones.
  std::vector<cublasLtMatmulAlgo_t> tried, equal;
  int probed = 1;  // the reference
  auto probe = [&](const cublasLtMatmulAlgo_t& algo) -> status {
    auto same = gives_the_bits(algo);
    if (!same) return same.error();
    ++probed;
    if (*same) equal.push_back(algo);
    return status::ok();
  };
  // The reference too must give its own bits at the other row counts, else no row count's
  // choice can be trusted: then it alone is kept (the rows of a call may depend on m; the
  // determinism tests would show it).
  auto reference_holds = gives_the_bits(reference);
  if (!reference_holds) return reference_holds.error();
  for (int i = 0; *reference_holds && i < count; ++i) {
    if (found[static_cast<std::size_t>(i)].state != CUBLAS_STATUS_SUCCESS) continue;
    cublasLtMatmulAlgo_t algo = found[static_cast<std::size_t>(i)].algo;
    if (!without_split_k(algo) || among(tried, algo)) continue;
    tried.push_back(algo);
    if (same_algo(algo, reference)) {
      equal.push_back(algo);
      continue;
    }
    if (!fits(algo)) continue;
    if (auto st = probe(algo); !st) return st;
  }
  if (!among(equal, reference)) {
    equal.push_back(reference);
    tried.push_back(reference);
  }
  int enumerated = 0;
  for (const cublasLtMatmulAlgo_t& algo : configured) {
    if (!*reference_holds || enumerated == max_enumerated_probes) break;
    if (among(tried, algo) || !fits(algo)) continue;
    ++enumerated;
    if (auto st = probe(algo); !st) return st;
  }
  auto kept = fastest_algo(handle, g, c_type, real, equal, reference, workspace, stream);
  if (!kept) return kept.error();
  gemm_choice choice;
  choice.shape = shape_text(g, ab, c_type);
  choice.bucket = bucket;
  choice.candidates = probed;
  choice.equal = static_cast<int>(equal.size());
  choice.rows_probed = row_counts;
  choice.reference_row_invariant = *reference_holds;
  choice.chosen = algo_text(kept->algo);
  choice.chosen_us = kept->us;
  choice.reference_us = kept->reference_us;
  {
    choice_log& log = choices();
    std::lock_guard<std::mutex> lock(log.mutex);
    log.choices.push_back(std::move(choice));
  }
  return kept->algo;
}

}  // namespace

std::vector<gemm_choice> gemm_choices() {
  choice_log& log = choices();
  std::lock_guard<std::mutex> lock(log.mutex);
  return log.choices;
}

namespace {

/// Sets a layout's strided batch: `batch` matrices `stride` elements apart.
status set_batch(std::string_view op, cublasLtMatrixLayout_t layout, std::int64_t batch, std::int64_t stride) {
  const auto count = static_cast<std::int32_t>(batch);
  TANDEM_LT_CALL(op, cublasLtMatrixLayoutSetAttribute, layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
  TANDEM_LT_CALL(op, cublasLtMatrixLayoutSetAttribute, layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                 sizeof(stride));
  return status::ok();
}

/// The descriptors and algorithm of one cuBLASLt call for the whole product (k > 0, m and n > 0,
/// dtypes checked), made on the first call of its key (choices that wait for the device
/// included) and cached.
result<std::shared_ptr<const call_plan>> plan_call(const exec_context& ctx, std::string_view op, dtype ab, dtype c_type,
                                                   const gemm_operands& g, void* workspace) {
  const cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream.native);
  if (g.row_invariant && g.transpose_a)
    return status{status_code::invalid_argument, std::string(op) + ": gemm: a row-invariant call takes A untransposed, got " +
                                                     shape_text(g, ab, c_type)};
  if (g.batch < 1 || g.batch > std::numeric_limits<std::int32_t>::max() ||
      (g.batch > 1 && (g.stride_a < 0 || g.stride_b < 0 || g.stride_c < 0)))
    return status{status_code::invalid_argument, std::string(op) + ": gemm: batch " + std::to_string(g.batch) +
                                                     " with strides " + std::to_string(g.stride_a) + ", " +
                                                     std::to_string(g.stride_b) + ", " + std::to_string(g.stride_c) +
                                                     " of " + shape_text(g, ab, c_type)};
  auto handle = handle_for(op, ctx.dev.index);
  if (!handle) return handle.error();

  // Column-major: C' [n, m] = op(B') · op(A') with A' = B (ld ldb), B' = A (ld lda).
  const auto rows_a = static_cast<std::uint64_t>(g.transpose_b ? g.k : g.n);
  const auto cols_a = static_cast<std::uint64_t>(g.transpose_b ? g.n : g.k);
  const auto rows_b = static_cast<std::uint64_t>(g.transpose_a ? g.m : g.k);
  const auto cols_b = static_cast<std::uint64_t>(g.transpose_a ? g.k : g.m);
  const cublasOperation_t op_a = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;

  // A row-invariant call's A and C start at a row of a batch: their alignment, as much of it as an
  // algorithm can use, must not change the algorithm either.
  const std::uint32_t row_align = g.row_invariant ? row_invariant_alignment : 256;
  const plan_key key{ctx.dev.index,
                     static_cast<int>(ab),
                     static_cast<int>(c_type),
                     g.transpose_a,
                     g.transpose_b,
                     g.accumulate,
                     g.row_invariant ? row_invariant_m : g.m,
                     g.n,
                     g.k,
                     g.lda,
                     g.ldb,
                     g.ldc,
                     std::min(alignment_of(g.a), row_align),
                     alignment_of(g.b),
                     std::min(alignment_of(g.c), row_align)};
  // A call seen before (the same shape, m, batch, ld's and alignment classes) reuses its
  // descriptors and algorithm: making them costs the host more than the product costs a decode
  // step's device.
  const bool batched = g.batch > 1;
  const call_key ck{key, g.m, g.row_invariant, g.batch, batched ? g.stride_a : 0, batched ? g.stride_b : 0,
                    batched ? g.stride_c : 0};
  if (std::shared_ptr<const call_plan> seen = calls().find(ck)) return seen;
  auto fresh = std::make_shared<call_plan>();
  descriptors& d = fresh->d;
  TANDEM_LT_CALL(op, cublasLtMatmulDescCreate, &d.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  TANDEM_LT_CALL(op, cublasLtMatmulDescSetAttribute, d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
  TANDEM_LT_CALL(op, cublasLtMatmulDescSetAttribute, d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
  TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &d.a, cuda_type(ab), rows_a, cols_a, g.ldb);
  TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &d.b, cuda_type(ab), rows_b, cols_b, g.lda);
  TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &d.c, cuda_type(c_type), static_cast<std::uint64_t>(g.n),
                                                 static_cast<std::uint64_t>(g.m), g.ldc);

  cublasLtMatmulAlgo_t algo;
  if (!plans().find(key, algo)) {
    // Split-K only through a separate float32 reduction: no in-place (output-type) accumulation;
    // none at all for a row-invariant call (its factor would be chosen for another m).
    const std::uint32_t schemes = g.row_invariant ? CUBLASLT_REDUCTION_SCHEME_NONE : CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (auto st = make_preference(op, d.preference, schemes, key); !st) return st;
    cublasLtMatrixLayout_t query_b = d.b, query_c = d.c;
    if (g.row_invariant) {  // B' [k, m] and C [n, m] (column-major) at row_invariant_rows rows
      const auto rows = static_cast<std::uint64_t>(row_invariant_rows);
      TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &d.query_b, cuda_type(ab), rows_b, rows, g.lda);
      TANDEM_LT_CALL(op, cublasLtMatrixLayoutCreate, &d.query_c, cuda_type(c_type), static_cast<std::uint64_t>(g.n),
                                                     rows, g.ldc);
      query_b = d.query_b, query_c = d.query_c;
    }
    cublasLtMatmulHeuristicResult_t found;
    std::memset(&found, 0, sizeof(found));
    int count = 0;
    TANDEM_LT_CALL(op, cublasLtMatmulAlgoGetHeuristic, *handle, d.matmul, d.a, query_b, query_c, query_c, d.preference, 1,
                                                       &found, &count);
    if (count == 0 || found.state != CUBLAS_STATUS_SUCCESS)
      return status{status_code::unsupported,
              std::string(op) + ": cublasLtMatmulAlgoGetHeuristic found no algorithm for " + shape_text(g, ab, c_type)};
    algo = found.algo;
    if (g.row_invariant) {  // the algorithm must also run at this call's m, with the same bits per row
      const std::int32_t one = 1;
      const std::uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
      TANDEM_LT_CALL(op, cublasLtMatmulAlgoConfigSetAttribute, &algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof(one));
      TANDEM_LT_CALL(op, cublasLtMatmulAlgoConfigSetAttribute, &algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none,
                                                              sizeof(none));
      cublasLtMatmulHeuristicResult_t checked;
      std::memset(&checked, 0, sizeof(checked));
      const cublasStatus_t fits = cublasLtMatmulAlgoCheck(*handle, d.matmul, d.a, d.b, d.c, d.c, &algo, &checked);
      if (fits != CUBLAS_STATUS_SUCCESS || checked.workspaceSize > gemm_workspace_bytes)
        return status{status_code::unsupported, std::string(op) + ": cublasLtMatmulAlgoCheck: the row-invariant algorithm of " +
                                              shape_text(g, ab, c_type) + " does not run at " + std::to_string(g.m) +
                                              " rows (" + cublasLtGetStatusName(fits) + ")"};
    }
    plans().insert(key, algo);
  }
  if (g.row_invariant && g.m <= small_rows_limit) {
    plan_key small = key;
    const std::int64_t bucket = rows_bucket(g.m);
    small.m = -bucket;  // beside row_invariant_m (-1): no bucket is 1 row
    cublasLtMatmulAlgo_t chosen;
    if (!plans().find(small, chosen)) {
      auto verified = small_rows_algo(op, *handle, g, ab, c_type, key, d, algo, bucket, workspace, stream);
      if (!verified) return verified.error();
      chosen = *verified;
      plans().insert(small, chosen);
    }
    // Checked at the m of the bucket's first call: at another m it must pass again, else the
    // row-invariant algorithm (the same bits) runs.
    if (runs(*handle, d, chosen)) algo = chosen;
  }
  if (batched) {
    // The single product's algorithm over the batch (the bucket's choice where it runs batched,
    // else the row-invariant algorithm: the same bits), never one chosen for the batch.
    TANDEM_RETURN_IF_ERROR(set_batch(op, d.a, g.batch, g.stride_b));
    TANDEM_RETURN_IF_ERROR(set_batch(op, d.b, g.batch, g.stride_a));
    TANDEM_RETURN_IF_ERROR(set_batch(op, d.c, g.batch, g.stride_c));
    cublasLtMatmulAlgo_t single;
    if (!runs(*handle, d, algo) && !(g.row_invariant && plans().find(key, single) && runs(*handle, d, algo = single)))
      return status{status_code::unsupported, std::string(op) + ": gemm: the algorithm of one " + shape_text(g, ab, c_type) +
                                                  " does not run as a batch of " + std::to_string(g.batch)};
  }
  fresh->algo = algo;
  calls().insert(ck, fresh);
  return std::shared_ptr<const call_plan>(std::move(fresh));
}

/// One cuBLASLt call for the whole product (k > 0, m and n > 0, dtypes checked).
status gemm_call(const exec_context& ctx, std::string_view op, dtype ab, dtype c_type, const gemm_operands& g,
                 void* workspace) {
  auto plan = plan_call(ctx, op, ab, c_type, g, workspace);
  if (!plan) return plan.error();
  auto handle = handle_for(op, ctx.dev.index);
  if (!handle) return handle.error();
  const call_plan& p = **plan;
  const float alpha = 1.f, beta = g.accumulate ? 1.f : 0.f;
  TANDEM_LT_CALL(op, cublasLtMatmul, *handle, p.d.matmul, &alpha, g.b, p.d.a, g.a, p.d.b, &beta, g.c, p.d.c, g.c, p.d.c,
                 &p.algo, workspace, gemm_workspace_bytes, static_cast<cudaStream_t>(ctx.stream.native));
  return status::ok();
}

/// The k-range [k0, k0 + k) of g: A's columns (its rows when transposed) and B's rows (columns
/// when transposed) from k0 on; C accumulates from the second block on.
gemm_operands k_block(const gemm_operands& g, std::int64_t k0, std::int64_t k, dtype ab) {
  const auto element = static_cast<std::int64_t>(size_of(ab));
  gemm_operands block = g;
  block.k = k;
  block.a = static_cast<const char*>(g.a) + k0 * (g.transpose_a ? g.lda : 1) * element;
  block.b = static_cast<const char*>(g.b) + k0 * (g.transpose_b ? 1 : g.ldb) * element;
  block.accumulate = g.accumulate || k0 > 0;
  return block;
}

/// f(block) for each k block of g in order (the whole of g unless a float32 product's k passes
/// float32_k_block); the first error returned.
template <class F>
status in_k_blocks(dtype ab, const gemm_operands& g, F&& f) {
  if (ab != dtype::float32 || g.k <= float32_k_block) return f(g);
  for (std::int64_t k0 = 0; k0 < g.k; k0 += float32_k_block)
    TANDEM_RETURN_IF_ERROR(f(k_block(g, k0, std::min(float32_k_block, g.k - k0), ab)));
  return status::ok();
}

}  // namespace

status gemm(const exec_context& ctx, std::string_view op, dtype ab, dtype c_type, const gemm_operands& g,
            void* workspace) {
  if ((ab != dtype::float32 && ab != dtype::bfloat16) || (c_type != dtype::float32 && c_type != ab))
    return {status_code::unsupported, std::string(op) + ": gemm: unsupported dtypes " + shape_text(g, ab, c_type)};
  if (g.m == 0 || g.n == 0) return status::ok();
  if (g.k == 0) {  // an empty sum: C = 0, or C unchanged when accumulating
    if (g.accumulate) return status::ok();
    const std::size_t element = size_of(c_type);
    const cudaError_t e =
        cudaMemset2DAsync(g.c, static_cast<std::size_t>(g.ldc) * element, 0, static_cast<std::size_t>(g.n) * element,
                          static_cast<std::size_t>(g.m), static_cast<cudaStream_t>(ctx.stream.native));
    if (e != cudaSuccess)
      return {status_code::device_error,
              std::string(op) + ": cudaMemset2DAsync: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
    return status::ok();
  }
  return in_k_blocks(ab, g, [&](const gemm_operands& block) { return gemm_call(ctx, op, ab, c_type, block, workspace); });
}

status gemm_prepare(const exec_context& ctx, std::string_view op, dtype ab, dtype c_type, const gemm_operands& g,
                    void* workspace) {
  if ((ab != dtype::float32 && ab != dtype::bfloat16) || (c_type != dtype::float32 && c_type != ab))
    return {status_code::unsupported, std::string(op) + ": gemm: unsupported dtypes " + shape_text(g, ab, c_type)};
  if (g.m == 0 || g.n == 0 || g.k == 0) return status::ok();  // no cuBLASLt call to prepare
  return in_k_blocks(ab, g, [&](const gemm_operands& block) -> status {
    auto plan = plan_call(ctx, op, ab, c_type, block, workspace);
    return plan ? status::ok() : plan.error();
  });
}

}  // namespace tandem::gpu::ops::cuda
