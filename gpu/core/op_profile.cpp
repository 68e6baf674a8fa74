// The op profile of op_profile.h: marks kept in host order, timed at the stop.
#include "gpu/core/op_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

namespace tandem::gpu {
namespace internal {
#if TANDEM_HAVE_CUDA
result<void*> cuda_record_event(int index, void* stream);  // a timing event, recorded on `stream`
result<double> cuda_event_ms(void* from, void* to);         // waits for `to`
void cuda_destroy_event(void* event);
#endif
}  // namespace internal

namespace {

struct mark {
  std::string name;
  bool on_cpu = true;
  void* event = nullptr;  // CUDA
  std::chrono::steady_clock::time_point at{};  // CPU
};

std::atomic<bool> armed{false};
std::mutex marks_mutex;
std::vector<mark> marks;
status first_failure = status::ok();

void drop_marks() {  // holds marks_mutex
#if TANDEM_HAVE_CUDA
  for (mark& m : marks)
    if (m.event) internal::cuda_destroy_event(m.event);
#endif
  marks.clear();
  first_failure = status::ok();
}

void record(const exec_context& ctx, std::string name) {  // holds marks_mutex
  mark m{std::move(name), ctx.dev.is_cpu()};
  if (m.on_cpu) {
    m.at = std::chrono::steady_clock::now();
  } else {
#if TANDEM_HAVE_CUDA
    auto e = internal::cuda_record_event(ctx.dev.index, ctx.stream.native);
    if (!e) {
      if (first_failure.is_ok()) first_failure = {e.error().code(), "op profile: marking " + m.name + ": " + e.error().message()};
      return;
    }
    m.event = *e;
#endif
  }
  marks.push_back(std::move(m));
}

result<double> elapsed_ms(const mark& from, const mark& to) {
  if (from.on_cpu != to.on_cpu)
    return status{status_code::invalid_argument, "op profile: marks of the CPU and of a device interleave (" + from.name + ", " +
                                                     to.name + "): profile one engine at a time"};
  if (from.on_cpu) return std::chrono::duration<double, std::milli>(to.at - from.at).count();
#if TANDEM_HAVE_CUDA
  return internal::cuda_event_ms(from.event, to.event);
#else
  return status{status_code::unsupported, "op profile: a device mark in a build without CUDA"};
#endif
}

}  // namespace

void op_profile_start() {
  std::lock_guard lock(marks_mutex);
  drop_marks();
  armed.store(true, std::memory_order_release);
}

bool op_profile_armed() { return armed.load(std::memory_order_acquire); }

void op_profile_mark(const exec_context& ctx, std::string_view name) {
  if (!armed.load(std::memory_order_acquire)) return;
  std::lock_guard lock(marks_mutex);
  if (armed.load(std::memory_order_relaxed)) record(ctx, std::string(name));
}

result<std::vector<op_time>> op_profile_stop(const exec_context& ctx) {
  std::lock_guard lock(marks_mutex);
  armed.store(false, std::memory_order_release);
  record(ctx, "(end)");
  struct cleanup {
    ~cleanup() { drop_marks(); }
  } at_exit;
  if (!first_failure) return first_failure;
  std::map<std::string, op_time> by_name;
  for (std::size_t i = 0; i + 1 < marks.size(); ++i) {
    auto ms = elapsed_ms(marks[i], marks[i + 1]);
    if (!ms) return ms.error();
    op_time& t = by_name[marks[i].name];
    t.name = marks[i].name;
    t.calls += 1;
    t.ms += *ms;
  }
  std::vector<op_time> out;
  for (auto& [name, t] : by_name) out.push_back(std::move(t));
  std::stable_sort(out.begin(), out.end(), [](const op_time& a, const op_time& b) { return a.ms > b.ms; });
  return out;
}

}  // namespace tandem::gpu
