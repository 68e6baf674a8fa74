// Injected op failures (fault_injection.h): one armed (op, call) at a time, behind a flag so an
// unarmed process pays one relaxed load per op call.
#include "gpu/ops/fault_injection.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace tandem::gpu::ops {
namespace {

struct armed_failure {
  std::mutex lock;
  std::string op;
  std::int64_t nth = 0, calls = 0;
};

armed_failure& state() {
  static armed_failure s;
  return s;
}

std::atomic<bool> armed{false};
std::once_flag environment_read;

// TANDEM_FAULT_OP=NAME[@N]; a malformed N arms nothing and says so once.
void read_environment() {
  const char* value = std::getenv("TANDEM_FAULT_OP");
  if (!value || !*value) return;
  const std::string spec(value);
  const auto at = spec.find('@');
  std::int64_t nth = 1;
  if (at != std::string::npos) {
    char* end = nullptr;
    nth = std::strtoll(spec.c_str() + at + 1, &end, 10);
    if (end == spec.c_str() + at + 1 || *end != '\0' || nth < 1) return;
  }
  inject_op_failure(spec.substr(0, at), nth);
}

}  // namespace

void inject_op_failure(std::string op, std::int64_t nth) {
  armed_failure& s = state();
  std::lock_guard<std::mutex> hold(s.lock);
  s.op = std::move(op);
  s.nth = nth;
  s.calls = 0;
  armed.store(!s.op.empty() && nth >= 1, std::memory_order_release);
}

status injected_failure(std::string_view op) {
  std::call_once(environment_read, read_environment);
  if (!armed.load(std::memory_order_acquire)) return status::ok();
  armed_failure& s = state();
  std::lock_guard<std::mutex> hold(s.lock);
  if (s.op != op || ++s.calls != s.nth) return status::ok();
  armed.store(false, std::memory_order_release);
  s.op.clear();
  return {status_code::device_error, std::string(op) + ": injected failure (call " + std::to_string(s.nth) + ")"};
}

}  // namespace tandem::gpu::ops
