// Fault injection (fault_injection.hpp).
#include "actors/worker/fault_injection.hpp"

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "actors/bridge/log_line.hpp"

namespace tandem {
namespace {

/// Forwards every collective; flips bit 0 of the first word of payload broadcast `target` sent
/// from this rank (payloads: int32 broadcasts longer than the 4-word stream header), and restores
/// it afterwards so the sender's own copy stays intact.
class corrupting_group final : public gpu::communicator {
 public:
  corrupting_group(std::shared_ptr<gpu::communicator> inner, std::uint64_t target) : inner_(std::move(inner)), target_(target) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  gpu::exec_context context() const override { return inner_->context(); }

 protected:
  gpu::status broadcast_raw(void* data, std::int64_t count, gpu::dtype type, int root) override {
    if (type != gpu::dtype::int32) return unsupported("broadcast");
    std::span<std::int32_t> words(static_cast<std::int32_t*>(data), static_cast<std::size_t>(count));
    const bool corrupt = root == rank() && count > 4 && ++payloads_ == target_;
    if (corrupt) {
      words[0] ^= 1;
      log_line("fault injection: corrupting refit payload " + std::to_string(target_) + " in transit");
    }
    gpu::status s = inner_->broadcast(words, root);
    if (corrupt) words[0] ^= 1;
    return s;
  }
  gpu::status all_reduce_raw(void*, std::int64_t, gpu::dtype, gpu::reduce_op) override { return unsupported("all_reduce"); }
  gpu::status all_gather_raw(const void*, void*, std::int64_t, gpu::dtype) override { return unsupported("all_gather"); }
  gpu::status reduce_scatter_raw(const void*, void*, std::int64_t, gpu::dtype) override {
    return unsupported("reduce_scatter");
  }

 private:
  static gpu::status unsupported(const char* op) {
    return {gpu::status_code::unsupported, std::string("fault injection wraps refit broadcasts of int32 words only, not ") + op};
  }

  std::shared_ptr<gpu::communicator> inner_;
  std::uint64_t target_;
  std::uint64_t payloads_ = 0;
};

}  // namespace

std::shared_ptr<gpu::communicator> with_injected_faults(std::shared_ptr<gpu::communicator> group) {
  const char* n = std::getenv("TANDEM_FAULT_CORRUPT_REFIT_PAYLOAD");
  if (group == nullptr || n == nullptr || std::strtoull(n, nullptr, 10) == 0) return group;
  return std::make_shared<corrupting_group>(std::move(group), std::strtoull(n, nullptr, 10));
}

}  // namespace tandem
