// cuDNN SDPA through the cudnn frontend (cudnn_attention.h).
#include "cudnn_attention.h"

#if TANDEM_HAVE_CUDNN_FRONTEND

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace tandem::bench {
namespace {

namespace fe = cudnn_frontend;
using gpu::status;
using gpu::status_code;

#define TANDEM_BENCH_TRY(expr)              \
  do {                                      \
    if (status s_ = (expr); !s_) return s_; \
  } while (0)

status fe_status(fe::error_t e, const std::string& what) {
  if (e.is_good()) return status::ok();
  return {status_code::unsupported, "cuDNN attention: " + what + ": " + e.get_message()};
}

struct device_block {
  void* p = nullptr;
  ~device_block() {
    if (p) cudaFree(p);
  }
};

class sdpa final : public cudnn_attention {
 public:
  ~sdpa() override {
    if (handle_) cudnnDestroy(handle_);
  }

  status build(const shape& s) {
    if (cudnnCreate(&handle_) != CUDNN_STATUS_SUCCESS) return {status_code::device_error, "cuDNN attention: cudnnCreate failed"};
    const std::int64_t t = s.tokens, h = s.heads, g = s.kv_heads, d = s.d;
    const std::vector<std::int64_t> q_dim{1, h, t, d}, q_stride{t * h * d, d, h * d, 1};
    const std::vector<std::int64_t> kv_dim{1, g, t, d}, kv_stride{t * g * d, d, g * d, 1};
    const std::vector<std::int64_t> st_dim{1, h, t, 1}, st_stride{h * t, t, 1, 1};
    const auto alloc = [](device_block& b, std::int64_t bytes) {
      return cudaMalloc(&b.p, static_cast<size_t>(bytes)) == cudaSuccess;
    };
    if (!alloc(q_, t * h * d * 2) || !alloc(k_, t * g * d * 2) || !alloc(v_, t * g * d * 2) || !alloc(o_, t * h * d * 2) ||
        !alloc(do_, t * h * d * 2) || !alloc(dq_, t * h * d * 2) || !alloc(dk_, t * g * d * 2) || !alloc(dv_, t * g * d * 2) ||
        !alloc(stats_, t * h * 4))
      return {status_code::out_of_memory, "cuDNN attention: buffers"};
    // Small random-ish bf16 values (0x3c00 + noise: about 0.0078..0.016), never zeros.
    for (auto* b : {&q_, &k_, &v_, &do_}) {
      const std::int64_t n = (b == &k_ || b == &v_) ? t * g * d : t * h * d;
      std::vector<std::uint16_t> host(static_cast<std::size_t>(n));
      std::uint32_t x = 12345;
      for (auto& e : host) {
        x = x * 1664525u + 1013904223u;
        e = static_cast<std::uint16_t>(0x3c00u + (x >> 24) + ((x >> 23) & 1 ? 0x8000u : 0u));
      }
      if (cudaMemcpy(b->p, host.data(), static_cast<size_t>(n * 2), cudaMemcpyHostToDevice) != cudaSuccess)
        return {status_code::device_error, "cuDNN attention: upload"};
    }

    const auto make_graph = [] {
      auto graph = std::make_shared<fe::graph::Graph>();
      graph->set_io_data_type(fe::DataType_t::BFLOAT16)
          .set_intermediate_data_type(fe::DataType_t::FLOAT)
          .set_compute_data_type(fe::DataType_t::FLOAT);
      return graph;
    };
    const auto input = [](fe::graph::Graph& graph, const char* name, const std::vector<std::int64_t>& dim,
                          const std::vector<std::int64_t>& stride) {
      return graph.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(dim).set_stride(stride));
    };

    // Forward.
    fwd_ = make_graph();
    fq_ = input(*fwd_, "Q", q_dim, q_stride);
    fk_ = input(*fwd_, "K", kv_dim, kv_stride);
    fv_ = input(*fwd_, "V", kv_dim, kv_stride);
    auto options = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(1.0f).set_causal_mask(true);
    if (s.window > 0) options.set_diagonal_band_left_bound(static_cast<int>(s.window));
    auto [o, stats] = fwd_->sdpa(fq_, fk_, fv_, options);
    o->set_output(true).set_dim(q_dim).set_stride(q_stride);
    stats->set_output(true).set_data_type(fe::DataType_t::FLOAT).set_dim(st_dim).set_stride(st_stride);
    fo_ = o;
    fstats_ = stats;
    TANDEM_BENCH_TRY(fe_status(fwd_->validate(), "forward: validate"));
    TANDEM_BENCH_TRY(fe_status(fwd_->build(handle_, {fe::HeurMode_t::A}), "forward: build"));

    std::int64_t fwd_ws = 0, bwd_ws = 0;
    TANDEM_BENCH_TRY(fe_status(fwd_->get_workspace_size(fwd_ws), "forward: workspace"));
    // The backward: a declined one (cuDNN's reason kept in backward_status_) leaves the forward.
    backward_status_ = [&]() -> status {
      bwd_ = make_graph();
      bq_ = input(*bwd_, "Q", q_dim, q_stride);
      bk_ = input(*bwd_, "K", kv_dim, kv_stride);
      bv_ = input(*bwd_, "V", kv_dim, kv_stride);
      bo_ = input(*bwd_, "O", q_dim, q_stride);
      bdo_ = input(*bwd_, "dO", q_dim, q_stride);
      bstats_ = bwd_->tensor(fe::graph::Tensor_attributes()
                                 .set_name("Stats")
                                 .set_dim(st_dim)
                                 .set_stride(st_stride)
                                 .set_data_type(fe::DataType_t::FLOAT));
      auto boptions = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(1.0f).set_causal_mask(true);
      if (s.window > 0) boptions.set_diagonal_band_left_bound(static_cast<int>(s.window));
      auto [dq, dk, dv] = bwd_->sdpa_backward(bq_, bk_, bv_, bo_, bdo_, bstats_, boptions);
      dq->set_output(true).set_dim(q_dim).set_stride(q_stride);
      dk->set_output(true).set_dim(kv_dim).set_stride(kv_stride);
      dv->set_output(true).set_dim(kv_dim).set_stride(kv_stride);
      bdq_ = dq;
      bdk_ = dk;
      bdv_ = dv;
      TANDEM_BENCH_TRY(fe_status(bwd_->validate(), "backward: validate"));
      TANDEM_BENCH_TRY(fe_status(bwd_->build(handle_, {fe::HeurMode_t::A}), "backward: build"));
      return fe_status(bwd_->get_workspace_size(bwd_ws), "backward: workspace");
    }();
    if (!alloc(workspace_, std::max<std::int64_t>({fwd_ws, bwd_ws, 1})))
      return {status_code::out_of_memory, "cuDNN attention: workspace"};
    return forward();  // the backward needs the forward's O and statistics
  }

  status backward_status() const override { return backward_status_; }

  status forward() override {
    std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void*> pack{
        {fq_, q_.p}, {fk_, k_.p}, {fv_, v_.p}, {fo_, o_.p}, {fstats_, stats_.p}};
    return fe_status(fwd_->execute(handle_, pack, workspace_.p), "forward: execute");
  }

  status backward() override {
    if (!backward_status_) return backward_status_;
    std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void*> pack{
        {bq_, q_.p},   {bk_, k_.p},   {bv_, v_.p},   {bo_, o_.p},  {bdo_, do_.p},
        {bstats_, stats_.p}, {bdq_, dq_.p}, {bdk_, dk_.p}, {bdv_, dv_.p}};
    return fe_status(bwd_->execute(handle_, pack, workspace_.p), "backward: execute");
  }

 private:
  cudnnHandle_t handle_ = nullptr;
  device_block q_, k_, v_, o_, do_, dq_, dk_, dv_, stats_, workspace_;
  std::shared_ptr<fe::graph::Graph> fwd_, bwd_;
  std::shared_ptr<fe::graph::Tensor_attributes> fq_, fk_, fv_, fo_, fstats_;
  std::shared_ptr<fe::graph::Tensor_attributes> bq_, bk_, bv_, bo_, bdo_, bstats_, bdq_, bdk_, bdv_;
  status backward_status_;
};

}  // namespace

std::string cudnn_attention_unavailable() { return ""; }

gpu::result<std::unique_ptr<cudnn_attention>> cudnn_attention::make(const shape& s) {
  auto p = std::make_unique<sdpa>();
  if (status st = p->build(s); !st) return st;
  return std::unique_ptr<cudnn_attention>(std::move(p));
}

}  // namespace tandem::bench

#else  // no frontend headers at build time

namespace tandem::bench {

std::string cudnn_attention_unavailable() {
  return "this build found no cudnn frontend headers (tools/fetch_cudnn_frontend.sh puts PyPI's into "
         "build/_deps, then re-run cmake)";
}

gpu::result<std::unique_ptr<cudnn_attention>> cudnn_attention::make(const shape&) {
  return gpu::status{gpu::status_code::unsupported, "cuDNN attention: " + cudnn_attention_unavailable()};
}

}  // namespace tandem::bench

#endif
