// Opening a checkpoint directory and loading it.
#include "gpu/model/checkpoint.h"

#include "gpu/core/convert.h"
#include "gpu/model/slab_views.h"

namespace tandem::gpu {

result<checkpoint> open_checkpoint(const std::filesystem::path& dir, dtype slab_type) {
  if (!is_storage_float(slab_type))
    return status(status_code::invalid_argument, "open_checkpoint: " + std::string(to_string(slab_type)) + " is not a weight dtype");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return status(std::filesystem::exists(dir, ec) ? status_code::invalid_argument : status_code::not_found,
                  dir.string() + ": not a checkpoint directory");
  auto config = load_model_config(dir);
  if (!config) return config.error();
  checkpoint c;
  c.directory = dir;
  c.config = std::move(*config);
  c.layout = build_layout(c.config, slab_type);
  auto kind = find_weights(dir);
  if (!kind) return kind.error();
  if (*kind == weights_kind::none) return c;
  auto files = checkpoint_files::open(dir);
  if (!files) return files.error();
  std::vector<std::string> names;
  names.reserve(files->tensors().size());
  for (const auto& e : files->tensors()) names.push_back(e.tensor->name);
  const checkpoint_files& f = *files;
  auto plan = plan_weights(
      c.config, c.layout, names, [&](const std::string& name) { return f.file_of(*f.find(name)).path().string(); },
      f.manifest().string());
  if (!plan) return plan.error();
  auto report = check_weights(*plan, f, c.config, c.layout);
  if (!report) return report.error();
  c.plan = std::move(*plan);
  c.report = std::move(*report);
  c.files = std::move(*files);
  return c;
}

result<slab> load_checkpoint(const checkpoint& c, device dev) {
  if (!c.files) return status(status_code::not_found, c.directory.string() + ": no weights to load (a config-only directory)");
  auto s = slab::create("parameters", c.layout.total_bytes(), dev);
  if (!s) return s.error();
  if (status st = load_weights(c.plan, *c.files, c.config, c.layout, *s); !st) return st;
  return std::move(*s);
}

}  // namespace tandem::gpu
