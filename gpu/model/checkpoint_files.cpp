// Finding, opening and cross-checking the weight files of a checkpoint directory.
#include "gpu/model/checkpoint_files.h"

#include <algorithm>

#include "gpu/model/checkpoint_index.h"
#include "gpu/model/json_text.h"

namespace tandem::gpu {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

result<weights_kind> find_weights(const fs::path& dir) {
  const bool single = is_file(dir / single_file_name);
  const bool index = is_file(dir / index_file_name);
  if (single && index)
    return status(status_code::invalid_argument, dir.string() + ": holds both " + std::string(single_file_name) + " and " +
                                                     std::string(index_file_name) + "; remove the stale one");
  if (single) return weights_kind::single;
  if (index) return weights_kind::sharded;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.ends_with(".bin") || n.ends_with(".pt") || n.ends_with(".pth") || n.ends_with(".gguf") || n.ends_with(".safetensors"))
      return status(status_code::unsupported, dir.string() + ": " + quote_name(n) + " is not a checkpoint tandem reads: expected " +
                                                  std::string(single_file_name) + " or " + std::string(index_file_name) +
                                                  " with its shards");
  }
  return weights_kind::none;
}

const checkpoint_files::entry* checkpoint_files::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::int64_t checkpoint_files::total_bytes() const {
  std::int64_t n = 0;
  for (const st_file& f : shards_) n += f.file_bytes();
  return n;
}

result<checkpoint_files> checkpoint_files::open(const fs::path& dir) {
  auto kind = find_weights(dir);
  if (!kind) return kind.error();
  checkpoint_files c;
  c.dir_ = dir;
  if (*kind == weights_kind::none)
    return status(status_code::not_found, dir.string() + ": no weights (expected " + std::string(single_file_name) + " or " +
                                              std::string(index_file_name) + ")");
  if (*kind == weights_kind::single) {
    c.manifest_ = dir / single_file_name;
    auto f = st_file::open(c.manifest_);
    if (!f) return f.error();
    c.shards_.push_back(std::move(*f));
  } else {
    c.sharded_ = true;
    c.manifest_ = dir / index_file_name;
    const std::string source = c.manifest_.string();
    auto text = read_text_file(c.manifest_);
    if (!text) return text.error();
    auto index = parse_checkpoint_index(*text, source);
    if (!index) return index.error();
    std::map<std::string, std::size_t, std::less<>> shard_of_file;
    for (const std::string& shard : index->shards) {
      const fs::path p = dir / shard;
      if (!is_file(p))
        return status(status_code::not_found, source + ": shard " + quote_name(shard) + " (of tensor " +
                                                  quote_name(std::find_if(index->weight_map.begin(), index->weight_map.end(),
                                                                      [&](const auto& kv) { return kv.second == shard; })->first) +
                                                  ") does not exist");
      auto f = st_file::open(p);
      if (!f) return f.error();
      shard_of_file.emplace(shard, c.shards_.size());
      c.shards_.push_back(std::move(*f));
    }
    for (const auto& [name, shard] : index->weight_map) {
      const st_file& f = c.shards_[shard_of_file.at(shard)];
      if (!f.header().find(name)) {
        std::string elsewhere;
        for (const st_file& g : c.shards_)
          if (g.header().find(name)) elsewhere = " (it is in " + quote_name(g.path().filename().string()) + ")";
        return status(status_code::invalid_argument, source + ": tensor " + quote_name(name) + ": the index maps it to " +
                                                         f.path().string() + ", which does not hold it" + elsewhere);
      }
    }
    for (const st_file& f : c.shards_) {
      for (const st_tensor& t : f.header().tensors) {
        auto it = index->weight_map.find(t.name);
        if (it == index->weight_map.end())
          return status(status_code::invalid_argument, f.path().string() + ": tensor " + quote_name(t.name) +
                                                           " is not listed in " + source);
        if (it->second != f.path().filename().string())
          return status(status_code::invalid_argument, f.path().string() + ": tensor " + quote_name(t.name) + " is also in this shard, but " +
                                                           source + " maps it to " + quote_name(it->second));
      }
    }
  }
  for (std::size_t s = 0; s < c.shards_.size(); ++s) {
    for (const st_tensor& t : c.shards_[s].header().tensors) {
      c.index_.emplace(t.name, c.tensors_.size());
      c.tensors_.push_back(entry{&t, s});
    }
  }
  return c;
}

}  // namespace tandem::gpu
