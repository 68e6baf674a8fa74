// Names, manifest and slab addresses of a loaded checkpoint (checkpoint_manifest.h).
#include "gpu/engine/checkpoint_manifest.h"

#include "gpu/model/slab_views.h"

namespace tandem::gpu {

std::vector<std::string> checkpoint_names(const checkpoint& c) {
  std::vector<std::string> names(c.layout.tensors.size());
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = hf_full_name(c.config, c.layout.tensors[i]);
  for (const planned_tensor& p : c.plan.tensors)
    if (p.role == tensor_role::text) names[p.layout_index] = p.name;
  return names;
}

weight_manifest layout_manifest(const model_layout& layout, const std::vector<std::string>& names) {
  weight_manifest out;
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) out.push_back({names[i], layout.tensors[i].shape, layout.tensors[i].type});
  return out;
}

std::vector<const std::byte*> slab_addresses(const slab& s, const model_layout& layout) {
  std::vector<const std::byte*> out;
  for (const tensor_entry& e : layout.tensors) out.push_back(static_cast<const std::byte*>(view_in(s, e, e.type)->data()));
  return out;
}

}  // namespace tandem::gpu
