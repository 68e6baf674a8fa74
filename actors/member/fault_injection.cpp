// Fault injection (fault_injection.hpp).
#include "actors/member/fault_injection.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "actors/api/refit_stream.hpp"
#include "actors/bridge/log_line.hpp"

namespace tandem {
namespace {

/// Forwards every broadcast; flips bit 0 of the first byte of bucket payload `target` (1-based,
/// counted over the run) that this rank broadcasts as a stream's root, and restores it afterwards
/// so the sender's own copy stays intact. Payloads are told apart by the stream's schedule
/// (refit_stream.hpp): an opening announces its bucket count, the next that many broadcasts are
/// payloads, then comes the closing.
class corrupting_group final : public gpu::communicator {
 public:
  corrupting_group(std::shared_ptr<gpu::communicator> inner, std::uint64_t target) : inner_(std::move(inner)), target_(target) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  gpu::exec_context context() const override { return inner_->context(); }

 protected:
  gpu::status broadcast_raw(void* data, std::int64_t count, gpu::dtype type, int root) override {
    if (type != gpu::dtype::uint8) return unsupported("broadcasts of another type than bytes");
    const std::span<std::byte> bytes(static_cast<std::byte*>(data), static_cast<std::size_t>(count));
    bool corrupt = false;
    if (root == rank()) {
      if (payloads_left_ > 0) {
        --payloads_left_;
        corrupt = ++payloads_ == target_ && !bytes.empty();
      } else if (const auto opening = read_stream_opening(bytes); opening && !opening->refused) {
        payloads_left_ = opening->bucket_count;
      }
    }
    if (corrupt) {
      bytes[0] ^= std::byte{1};
      log_line("fault injection: corrupting refit payload " + std::to_string(target_) + " in transit");
    }
    gpu::status s = inner_->broadcast(bytes, root);
    if (corrupt) bytes[0] ^= std::byte{1};
    return s;
  }
  gpu::status all_reduce_raw(void*, std::int64_t, gpu::dtype, gpu::reduce_op) override { return unsupported("all_reduce"); }
  gpu::status all_gather_raw(const void*, void*, std::int64_t, gpu::dtype) override { return unsupported("all_gather"); }
  gpu::status reduce_scatter_raw(const void*, void*, std::int64_t, gpu::dtype) override {
    return unsupported("reduce_scatter");
  }

 private:
  static gpu::status unsupported(const char* op) {
    return {gpu::status_code::unsupported, std::string("fault injection wraps refit stream broadcasts only, not ") + op};
  }

  std::shared_ptr<gpu::communicator> inner_;
  std::uint64_t target_;
  std::uint64_t payloads_ = 0;     // payloads broadcast as the root so far
  std::size_t payloads_left_ = 0;  // of the stream in progress
};

}  // namespace

std::shared_ptr<gpu::communicator> with_injected_faults(std::shared_ptr<gpu::communicator> group) {
  const char* n = std::getenv("TANDEM_FAULT_CORRUPT_REFIT_PAYLOAD");
  if (group == nullptr || n == nullptr || std::strtoull(n, nullptr, 10) == 0) return group;
  return std::make_shared<corrupting_group>(std::move(group), std::strtoull(n, nullptr, 10));
}

}  // namespace tandem
