// The drop-in checkpoint writer: which tensors go where (the source's order, shards packed
// greedily), the fill functions reading the slab or the source files, side files, and the
// partial-directory-then-rename commit.
#include "gpu/model/checkpoint_writer.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <stdio.h>
#include <unistd.h>

#include "gpu/core/convert.h"
#include "gpu/core/memory.h"
#include "gpu/model/checkpoint_index.h"
#include "gpu/model/json_text.h"
#include "gpu/model/safetensors_writer.h"

namespace tandem::gpu {
namespace {

namespace fs = std::filesystem;

// Files of a source directory that are weights in some format: never copied (they would be
// stale beside the new weights).
bool is_weight_file(const std::string& n) {
  for (const char* ext : {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".ckpt", ".index.json"})
    if (n.ends_with(ext)) return true;
  return false;
}

// Reads elements of the slab tensor `entry` and writes them converted to `to`.
st_write_item from_slab(const std::string& name, const tensor_entry& entry, const slab& weights, dtype to) {
  st_write_item item;
  item.name = name;
  item.type = st_dtype_of(to);
  item.shape = entry.shape;
  const dtype from = entry.type;
  const std::int64_t base = entry.offset_elements * static_cast<std::int64_t>(size_of(from));
  item.fill = [&weights, from, to, base, shape = entry.shape](std::int64_t byte_offset, std::span<std::byte> out) -> status {
    const std::int64_t first = byte_offset / static_cast<std::int64_t>(size_of(to));
    const std::int64_t count = static_cast<std::int64_t>(out.size() / size_of(to));
    const std::int64_t src_bytes = count * static_cast<std::int64_t>(size_of(from));
    auto view = weights.view_of(base + first * static_cast<std::int64_t>(size_of(from)), from, std::vector<std::int64_t>{count});
    if (!view) return view.error();
    if (weights.dev().is_cpu()) {
      convert_elements(view->data(), from, out.data(), to, count);
      return status::ok();
    }
    std::vector<std::byte> host(static_cast<std::size_t>(src_bytes));
    if (status s = copy_to_host(weights.dev(), host.data(), view->data(), src_bytes); !s) return s;
    convert_elements(host.data(), from, out.data(), to, count);
    return status::ok();
  };
  return item;
}

// Copies a tensor of the source checkpoint byte for byte.
st_write_item carried(const checkpoint_files& files, const checkpoint_files::entry& e) {
  st_write_item item;
  item.name = e.tensor->name;
  item.type = e.tensor->type;
  item.shape = e.tensor->shape;
  const std::span<const std::byte> data = files.file_of(e).data(*e.tensor);
  item.fill = [data](std::int64_t byte_offset, std::span<std::byte> out) -> status {
    std::memcpy(out.data(), data.data() + byte_offset, out.size());
    return status::ok();
  };
  return item;
}

// The tensors of the saved checkpoint: the source's, in its order, or the layout's.
std::vector<st_write_item> items_of(const checkpoint& source, const slab& weights, dtype to, save_report& report) {
  std::vector<st_write_item> items;
  const model_layout& layout = source.layout;
  if (!source.files) {
    for (const tensor_entry& e : layout.tensors) items.push_back(from_slab(hf_full_name(source.config, e), e, weights, to));
    report.text_tensors = static_cast<std::int64_t>(items.size());
    return items;
  }
  const tensor_entry* embed = layout.find("embed_tokens.weight");
  for (const planned_tensor& p : source.plan.tensors) {
    switch (p.role) {
      case tensor_role::text:
        items.push_back(from_slab(p.name, layout.tensors[p.layout_index], weights, to));
        ++report.text_tensors;
        break;
      case tensor_role::tied_head:  // written again, equal to the (possibly trained) embedding
        items.push_back(from_slab(p.name, *embed, weights, to));
        ++report.text_tensors;
        break;
      case tensor_role::unused_kv:
      case tensor_role::non_text:
        items.push_back(carried(*source.files, *source.files->find(p.name)));
        ++report.carried_tensors;
        break;
    }
  }
  return items;
}

// Greedy packing in order: a shard closes when the next tensor would take it past the limit.
std::vector<std::vector<st_write_item>> shard(std::vector<st_write_item> items, std::int64_t max_bytes) {
  std::vector<std::vector<st_write_item>> shards(1);
  std::int64_t size = 0;
  for (st_write_item& item : items) {
    if (!shards.back().empty() && size + item.bytes() > max_bytes) {
      shards.emplace_back();
      size = 0;
    }
    size += item.bytes();
    shards.back().push_back(std::move(item));
  }
  return shards;
}

std::string shard_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

status write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return status(status_code::io_error, path.string() + ": write failed");
  return sync_path(path);
}

status copy_side_file(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (!fs::copy_file(from, to, fs::copy_options::none, ec))
    return status(status_code::io_error, to.string() + ": cannot copy from " + from.string() + ": " + ec.message());
  return sync_path(to);
}

// Unique hidden sibling of `out` for the partial save.
fs::path partial_dir(const fs::path& out) {
  static std::atomic<int> counter{0};
  return out.parent_path() / ("." + out.filename().string() + ".partial-" + std::to_string(::getpid()) + "-" +
                              std::to_string(counter++));
}

status write_all(const checkpoint& source, const slab& weights, const fs::path& dir, const save_options& options,
                 save_report& report) {
  auto notify = [&](const std::string& file) { return options.on_file ? options.on_file(file) : status::ok(); };
  std::vector<st_write_item> items = items_of(source, weights, options.type, report);
  for (const st_write_item& item : items) report.bytes += item.bytes();
  const auto shards = shard(std::move(items), options.max_shard_bytes);
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shards.size() == 1 ? std::string(single_file_name) : shard_name(i, shards.size());
    if (status s = write_st_file(dir / name, shards[i], metadata); !s) return s;
    report.shards.push_back(name);
    for (const st_write_item& item : shards[i]) weight_map[item.name] = name;
    if (status s = notify(name); !s) return s;
  }
  if (shards.size() > 1) {
    const nlohmann::json index{{"metadata", {{"total_size", report.bytes}}}, {"weight_map", weight_map}};
    if (status s = write_text_file(dir / index_file_name, index.dump(2) + "\n"); !s) return s;
    if (status s = notify(std::string(index_file_name)); !s) return s;
  }
  std::error_code ec;
  std::vector<fs::path> sides;
  for (const auto& e : fs::directory_iterator(source.directory, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file(ec) && !is_weight_file(n) && !n.starts_with(".")) sides.push_back(e.path());
  }
  if (ec) return status(status_code::io_error, source.directory.string() + ": cannot list: " + ec.message());
  std::sort(sides.begin(), sides.end());
  for (const fs::path& p : sides) {
    if (status s = copy_side_file(p, dir / p.filename()); !s) return s;
    report.copied.push_back(p.filename().string());
    if (status s = notify(p.filename().string()); !s) return s;
  }
  if (options.extra_files)
    if (status s = options.extra_files(dir); !s) return s;
  return sync_path(dir);
}

}  // namespace

result<save_report> save_checkpoint(const checkpoint& source, const slab& weights, const fs::path& out_arg,
                                    const save_options& options) {
  if (!is_storage_float(options.type))
    return status(status_code::invalid_argument, "save: " + std::string(to_string(options.type)) + " is not a weight dtype");
  if (options.max_shard_bytes <= 0) return status(status_code::invalid_argument, "save: the shard size must be positive");
  if (weights.bytes() < source.layout.total_bytes())
    return status(status_code::invalid_argument, "save: slab " + weights.name() + " is smaller than the layout");
  const fs::path out = fs::absolute(out_arg).lexically_normal();
  const fs::path target = out.filename().empty() ? out.parent_path() : out;
  std::error_code ec;
  if (fs::exists(target, ec) && !options.replace)
    return status(status_code::invalid_argument, target.string() + ": already exists (replace it explicitly)");
  if (fs::exists(target, ec) && !fs::is_directory(target, ec))
    return status(status_code::invalid_argument, target.string() + ": exists and is not a directory");
  fs::create_directories(target.parent_path(), ec);
  if (ec) return status(status_code::io_error, target.parent_path().string() + ": cannot create: " + ec.message());

  const fs::path partial = partial_dir(target);
  if (!fs::create_directory(partial, ec)) return status(status_code::io_error, partial.string() + ": cannot create: " + ec.message());
  save_report report;
  report.directory = target;
  auto abandon = [&](status s) {
    std::error_code ignored;
    fs::remove_all(partial, ignored);
    return s;
  };
  if (status s = write_all(source, weights, partial, options, report); !s) return abandon(s);
  const bool exists = fs::exists(target, ec);
  const unsigned flags = exists ? RENAME_EXCHANGE : RENAME_NOREPLACE;
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, target.c_str(), flags) != 0)
    return abandon(status(status_code::io_error, target.string() + ": cannot move the saved checkpoint into place: " + std::strerror(errno)));
  if (exists) fs::remove_all(partial, ec);  // the replaced checkpoint, now under the partial name
  if (status s = sync_path(target.parent_path()); !s) return s;
  return report;
}

}  // namespace tandem::gpu
