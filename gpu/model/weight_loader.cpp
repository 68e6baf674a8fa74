// Checks and loads of the text stack. Each tensor is converted in chunks through a bounded host
// staging buffer when the slab is not in host memory, directly into the slab when it is.
#include "gpu/model/weight_loader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu/core/convert.h"
#include "gpu/core/memory.h"
#include "gpu/core/tensor.h"
#include "gpu/model/json_text.h"

namespace tandem::gpu {
namespace {

const st_tensor& header_of(const checkpoint_files& files, const std::string& name) { return *files.find(name)->tensor; }

std::string file_of(const checkpoint_files& files, const std::string& name) {
  return files.file_of(*files.find(name)).path().string();
}

status check_float(const checkpoint_files& files, const std::string& name, const std::vector<std::int64_t>& shape) {
  const st_tensor& t = header_of(files, name);
  auto bad = [&](const std::string& why) {
    return status(status_code::invalid_argument, file_of(files, name) + ": tensor " + quote_name(name) + ": " + why);
  };
  if (!compute_dtype_of(t.type)) return bad("dtype " + std::string(to_string(t.type)) + ", expected F32, BF16 or F16");
  if (t.shape != shape) return bad("shape " + shape_string(t.shape) + ", expected " + shape_string(shape) + " for this config");
  return status::ok();
}

// Converts `count` elements starting at element `first` of file tensor `t` into `dst` (host
// memory, `to`).
void convert_slice(const st_file& f, const st_tensor& t, std::int64_t first, std::int64_t count, void* dst, dtype to) {
  const dtype from = *compute_dtype_of(t.type);
  const std::byte* src = f.data(t).data() + first * static_cast<std::int64_t>(size_of(from));
  convert_elements(src, from, dst, to, count);
}

// Copies file tensor `t` into the slab at `byte_offset`, converting to `to`, in chunks: directly
// into host memory, through `staging` into device memory. Each chunk's file pages are released
// from this process's mapping once read.
status load_tensor(const st_file& f, const st_tensor& t, const slab& dst, std::int64_t byte_offset, dtype to,
                   std::vector<std::byte>& staging) {
  f.will_read(t);
  const std::int64_t n = t.elements();
  auto view = dst.view_of(byte_offset, to, std::vector<std::int64_t>{n});
  if (!view) return view.error();
  const std::int64_t in = static_cast<std::int64_t>(size_of(*compute_dtype_of(t.type)));
  const std::int64_t out = static_cast<std::int64_t>(size_of(to));
  const std::int64_t chunk = dst.dev().is_cpu() ? (std::int64_t{256} << 20) / in : static_cast<std::int64_t>(staging.size()) / out;
  auto* target = static_cast<std::byte*>(view->data());
  for (std::int64_t first = 0; first < n; first += chunk) {
    const std::int64_t count = std::min(chunk, n - first);
    if (dst.dev().is_cpu()) {
      convert_slice(f, t, first, count, target + first * out, to);
    } else {
      convert_slice(f, t, first, count, staging.data(), to);
      if (status s = copy_to_device(dst.dev(), target + first * out, staging.data(), count * out); !s) return s;
    }
    f.done_reading(t, first * in, (first + count) * in);
  }
  return status::ok();
}

// A tied lm_head.weight must hold the embedding's values (compared after widening to float32,
// which is exact for every storage type).
status check_tied_head(const checkpoint_files& files, const std::string& head, const std::string& embed) {
  const st_tensor& h = header_of(files, head);
  const st_tensor& e = header_of(files, embed);
  const st_file& hf = files.file_of(*files.find(head));
  const st_file& ef = files.file_of(*files.find(embed));
  constexpr std::int64_t chunk = 1 << 20;
  std::vector<float> a(chunk), b(chunk);
  const std::int64_t n = h.elements();
  for (std::int64_t first = 0; first < n; first += chunk) {
    const std::int64_t count = std::min(chunk, n - first);
    convert_slice(hf, h, first, count, a.data(), dtype::float32);
    convert_slice(ef, e, first, count, b.data(), dtype::float32);
    if (std::memcmp(a.data(), b.data(), static_cast<std::size_t>(count) * 4) != 0) {
      std::int64_t i = 0;
      while (std::memcmp(&a[static_cast<std::size_t>(i)], &b[static_cast<std::size_t>(i)], 4) == 0) ++i;
      char values[96];
      std::snprintf(values, sizeof values, "%.9g vs %.9g", static_cast<double>(a[static_cast<std::size_t>(i)]),
                    static_cast<double>(b[static_cast<std::size_t>(i)]));
      return status(status_code::invalid_argument, hf.path().string() + ": tensor " + quote_name(head) +
                                                       ": the config ties it to " + quote_name(embed) + ", but element " +
                                                       std::to_string(first + i) + " differs (" + values + ")");
    }
  }
  return status::ok();
}

}  // namespace

std::string format_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::int64_t load_report::skipped_tensors() const {
  std::int64_t n = 0;
  for (const auto& g : skipped) n += g.tensors;
  return n;
}

std::int64_t load_report::skipped_bytes() const {
  std::int64_t n = 0;
  for (const auto& g : skipped) n += g.bytes;
  return n;
}

std::string load_report::skipped_line() const {
  if (skipped.empty()) return {};
  std::string s = "skipped " + std::to_string(skipped_tensors()) + " non-text tensors (" + format_bytes(skipped_bytes()) + "):";
  for (std::size_t i = 0; i < skipped.size(); ++i)
    s += (i ? ", " : " ") + skipped[i].prefix + " " + std::to_string(skipped[i].tensors) + " (" + format_bytes(skipped[i].bytes) + ")";
  return s;
}

result<load_report> check_weights(const weight_plan& plan, const checkpoint_files& files,
                                  const model_config& config, const model_layout& layout) {
  load_report r;
  for (const planned_tensor& p : plan.tensors) {
    const checkpoint_files::entry* e = files.find(p.name);
    if (!e) return status(status_code::invalid_argument, files.manifest().string() + ": tensor " + quote_name(p.name) + " is not in the checkpoint");
    const std::int64_t bytes = e->tensor->bytes();
    switch (p.role) {
      case tensor_role::text:
        if (status s = check_float(files, p.name, layout.tensors[p.layout_index].shape); !s) return s;
        ++r.text_tensors;
        r.text_bytes += bytes;
        break;
      case tensor_role::tied_head:
        if (status s = check_float(files, p.name, {config.vocab_size, config.hidden_size}); !s) return s;
        r.tied_head_present = true;
        break;
      case tensor_role::unused_kv:
        ++r.unused_kv_tensors;
        r.unused_kv_bytes += bytes;
        break;
      case tensor_role::non_text: {
        auto g = std::find_if(r.skipped.begin(), r.skipped.end(), [&](const skipped_group& x) { return x.prefix == p.prefix; });
        if (g == r.skipped.end()) g = r.skipped.insert(r.skipped.end(), skipped_group{std::string(p.prefix), 0, 0});
        ++g->tensors;
        g->bytes += bytes;
        break;
      }
    }
  }
  const auto order = non_text_prefixes();
  std::sort(r.skipped.begin(), r.skipped.end(), [&](const skipped_group& a, const skipped_group& b) {
    return std::find(order.begin(), order.end(), a.prefix) < std::find(order.begin(), order.end(), b.prefix);
  });
  return r;
}

status load_weights(const weight_plan& plan, const checkpoint_files& files, const model_config& config,
                    const model_layout& layout, const slab& dst) {
  if (layout.tensors.empty()) return status::ok();
  const dtype to = layout.tensors.front().type;
  if (!is_storage_float(to))
    return status(status_code::invalid_argument, "load_weights: the layout's dtype " + std::string(to_string(to)) + " is not a weight type");
  if (dst.bytes() < layout.total_bytes())
    return status(status_code::invalid_argument, "load_weights: slab " + dst.name() + " holds " + std::to_string(dst.bytes()) +
                                                     " bytes, the layout needs " + std::to_string(layout.total_bytes()));
  if (plan.tied_head) {
    const std::string embed = hf_text_prefix(config) + "embed_tokens.weight";
    if (status s = check_tied_head(files, plan.tensors[*plan.tied_head].name, embed); !s) return s;
  }
  std::vector<std::byte> staging(dst.dev().is_cpu() ? 0 : std::size_t{64} << 20);
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    const planned_tensor& p = plan.tensors[plan.layout_source[i]];
    const checkpoint_files::entry& e = *files.find(p.name);
    const std::int64_t offset = layout.tensors[i].offset_elements * static_cast<std::int64_t>(size_of(to));
    if (status s = load_tensor(files.file_of(e), *e.tensor, dst, offset, to, staging); !s)
      return status(s.code(), files.file_of(e).path().string() + ": tensor " + quote_name(p.name) + ": " + s.message());
  }
  return status::ok();
}

}  // namespace tandem::gpu
