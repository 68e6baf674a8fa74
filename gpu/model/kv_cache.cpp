// The paged KV cache's pools, block tables and storage (kv_cache.h).
#include "gpu/model/kv_cache.h"

#include <algorithm>
#include <string>

namespace tandem::gpu {
namespace {

constexpr layer_type both[] = {layer_type::sliding, layer_type::full};

std::int64_t blocks_for(std::int64_t positions, std::int64_t block_size) { return (positions + block_size - 1) / block_size; }

/// Bytes of K and V per position over the non-shared layers of type t.
std::int64_t bytes_per_position(const model_config& c, dtype type, layer_type t) {
  std::int64_t n = 0;
  for (const layer_config& L : c.layers)
    if (!L.is_kv_shared && L.type == t) n += 2 * L.num_key_value_heads * L.head_dim * static_cast<std::int64_t>(size_of(type));
  return n;
}

status bad(const std::string& what) { return {status_code::invalid_argument, "kv_cache: " + what}; }

}  // namespace

std::int64_t kv_block_bytes(const model_config& c, dtype type, std::int64_t block_size) {
  return block_size * (bytes_per_position(c, type, layer_type::full) + bytes_per_position(c, type, layer_type::sliding));
}

kv_cache_options kv_cache_options_for(const model_config& c, dtype type, std::int64_t block_size, std::int64_t bytes) {
  kv_cache_options o;
  o.block_size = block_size;
  const std::int64_t per_block = kv_block_bytes(c, type, block_size);
  const std::int64_t blocks = per_block > 0 && block_size > 0 ? bytes / per_block : 0;
  if (bytes_per_position(c, type, layer_type::full) > 0) o.full_blocks = blocks;
  if (bytes_per_position(c, type, layer_type::sliding) > 0) o.sliding_blocks = blocks;
  return o;
}

result<kv_cache> kv_cache::create(const exec_context& ctx, const model_config& c, dtype type, const kv_cache_options& options) {
  if (options.block_size <= 0) return bad("block_size must be > 0, got " + std::to_string(options.block_size));
  if (options.block_size > 1 << 20) return bad("block_size " + std::to_string(options.block_size) + " is absurd");
  kv_cache out;
  out.ctx_ = ctx;
  out.ctx_.scratch = nullptr;
  out.config_ = c;
  out.options_ = options;
  for (layer_type t : both) {
    const bool needed = bytes_per_position(c, type, t) > 0;
    const std::int64_t blocks = t == layer_type::full ? options.full_blocks : options.sliding_blocks;
    if (needed && blocks <= 0)
      return bad(std::string(t == layer_type::full ? "full_blocks" : "sliding_blocks") + " must be >= 1 for a model with " +
                 std::string(to_string(t)) + " layers, got " + std::to_string(blocks));
    if (blocks > (std::int64_t{1} << 30)) return bad("a pool of " + std::to_string(blocks) + " blocks is absurd");
    pool& p = out.pool_of(t);
    p.blocks = needed ? blocks : 0;
    p.refs.assign(static_cast<std::size_t>(p.blocks), 0);
    for (std::int64_t b = p.blocks - 1; b >= 0; --b) p.free.push_back(static_cast<std::int32_t>(b));  // block 0 first
  }
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const layer_config& L = c.layers[static_cast<std::size_t>(l)];
    if (L.is_kv_shared) continue;
    // The pool's blocks and the spare one after them.
    const std::vector<std::int64_t> shape{out.pool_of(L.type).blocks + 1, options.block_size, L.num_key_value_heads, L.head_dim};
    for (auto* storage : {&out.k_, &out.v_}) {
      auto buffer = device_buffer::zeros(ctx, type, shape);
      if (!buffer) return status(buffer.error().code(), "kv_cache: layer " + std::to_string(l) + ": " + buffer.error().message());
      storage->emplace(l, std::move(*buffer));
    }
  }
  return out;
}

kv_cache::sequence_id kv_cache::add_sequence() {
  const sequence_id id = next_++;
  sequences_[id] = {};
  return id;
}

std::int64_t kv_cache::length(sequence_id s) const { return sequences_.at(s).length; }

std::int64_t kv_cache::free_blocks(layer_type t) const { return static_cast<std::int64_t>(pool_of(t).free.size()); }

std::int64_t kv_cache::used_blocks(layer_type t) const { return pool_of(t).blocks - free_blocks(t); }

std::int64_t kv_cache::mapped_blocks(sequence_id s, layer_type t) const {
  const auto& table = sequences_.at(s).table[static_cast<int>(t)];
  return std::count_if(table.begin(), table.end(), [](std::int32_t b) { return b >= 0; });
}

void kv_cache::drop(layer_type t, std::int32_t block) {
  if (block < 0) return;
  pool& p = pool_of(t);
  if (--p.refs[static_cast<std::size_t>(block)] == 0) p.free.push_back(block);
}

status kv_cache::copy_block(layer_type t, std::int32_t from, std::int32_t to) {
  for (auto* storage : {&k_, &v_})
    for (auto& [l, buffer] : *storage) {
      if (config_.layers[static_cast<std::size_t>(l)].type != t) continue;
      const tensor all = buffer.view();
      const std::int64_t block_bytes = all.numel() / all.dim(0) * static_cast<std::int64_t>(size_of(all.type()));
      auto* base = static_cast<std::byte*>(all.data());
      if (status s = copy_on_device(ctx_, base + to * block_bytes, base + from * block_bytes, block_bytes); !s)
        return status(s.code(), "kv_cache: copying " + std::string(to_string(t)) + " block " + std::to_string(from) + " of layer " +
                                    std::to_string(l) + ": " + s.message());
    }
  return status::ok();
}

status kv_cache::reserve(sequence_id s, std::int64_t n) {
  auto it = sequences_.find(s);
  if (it == sequences_.end()) return bad("reserve: no sequence " + std::to_string(s));
  if (n < 0) return bad("reserve: " + std::to_string(n) + " positions");
  sequence& q = it->second;
  const std::int64_t want = blocks_for(q.length + n, options_.block_size);
  for (layer_type t : both) {
    if (!has_type(t)) continue;
    const std::int64_t more = want - static_cast<std::int64_t>(q.table[static_cast<int>(t)].size());
    if (more > free_blocks(t))
      return {status_code::out_of_memory, "kv_cache: sequence " + std::to_string(s) + " needs " + std::to_string(more) + " more " +
                                              std::string(to_string(t)) + " blocks, " + std::to_string(free_blocks(t)) + " are free"};
  }
  for (layer_type t : both) {
    if (!has_type(t)) continue;
    pool& p = pool_of(t);
    auto& table = q.table[static_cast<int>(t)];
    while (static_cast<std::int64_t>(table.size()) < want) {
      const std::int32_t b = p.free.back();
      p.free.pop_back();
      p.refs[static_cast<std::size_t>(b)] = 1;
      table.push_back(b);
    }
  }
  q.length += n;
  return status::ok();
}

result<kv_cache::sequence_id> kv_cache::fork(sequence_id parent) {
  auto it = sequences_.find(parent);
  if (it == sequences_.end()) return bad("fork: no sequence " + std::to_string(parent));
  const sequence& from = it->second;
  const bool partial = from.length % options_.block_size != 0;
  if (partial)
    for (layer_type t : both)
      if (has_type(t) && free_blocks(t) < 1)
        return status{status_code::out_of_memory, "kv_cache: fork of sequence " + std::to_string(parent) +
                                                      " needs a free " + std::string(to_string(t)) + " block for its partial last block"};
  sequence child = from;
  status copied = status::ok();
  for (layer_type t : both) {
    if (!has_type(t)) continue;
    pool& p = pool_of(t);
    auto& table = child.table[static_cast<int>(t)];
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (table[i] < 0) continue;
      if (partial && i + 1 == table.size()) {
        const std::int32_t own = p.free.back();
        p.free.pop_back();
        p.refs[static_cast<std::size_t>(own)] = 1;
        if (copied) copied = copy_block(t, table[i], own);
        table[i] = own;
      } else {
        ++p.refs[static_cast<std::size_t>(table[i])];
      }
    }
  }
  const sequence_id id = next_++;
  sequences_[id] = std::move(child);
  if (!copied) {  // every reference the child took goes back
    release(id);
    return copied;
  }
  return id;
}

std::int64_t kv_cache::blocks_to_reserve(sequence_id s, std::int64_t n, layer_type t) const {
  if (!has_type(t)) return 0;
  const auto it = sequences_.find(s);
  const std::int64_t length = it == sequences_.end() ? 0 : it->second.length;
  const std::int64_t mapped = it == sequences_.end() ? 0 : static_cast<std::int64_t>(it->second.table[static_cast<int>(t)].size());
  return std::max<std::int64_t>(0, blocks_for(length + n, options_.block_size) - mapped);
}

std::int64_t kv_cache::blocks_to_fork(sequence_id s, layer_type t) const {
  const auto it = sequences_.find(s);
  if (!has_type(t) || it == sequences_.end()) return 0;
  return it->second.length % options_.block_size != 0 ? 1 : 0;
}

std::int64_t kv_cache::peak_blocks(layer_type t, std::int64_t length, std::int64_t chunk) const {
  if (!has_type(t)) return 0;
  const std::int64_t all = blocks_for(length, options_.block_size);
  if (t == layer_type::full) return all;
  return std::min(all, blocks_for(config_.sliding_window - 1 + std::min(chunk, length), options_.block_size) + 1);
}

void kv_cache::trim_window(sequence_id s) {
  auto it = sequences_.find(s);
  if (it == sequences_.end() || !has_type(layer_type::sliding)) return;
  const std::int64_t first_needed = it->second.length - config_.sliding_window + 1;  // of the next row
  auto& table = it->second.table[static_cast<int>(layer_type::sliding)];
  for (std::size_t b = 0; b < table.size(); ++b) {
    if (static_cast<std::int64_t>(b + 1) * options_.block_size > first_needed) break;
    drop(layer_type::sliding, table[b]);
    table[b] = -1;
  }
}

void kv_cache::release(sequence_id s) {
  auto it = sequences_.find(s);
  if (it == sequences_.end()) return;
  for (layer_type t : both)
    for (std::int32_t b : it->second.table[static_cast<int>(t)]) drop(t, b);
  sequences_.erase(it);
}

tensor kv_cache::k(int layer) const { return k_.at(layer).view(); }
tensor kv_cache::v(int layer) const { return v_.at(layer).view(); }

std::int32_t kv_cache::spare_block(layer_type t) const { return has_type(t) ? static_cast<std::int32_t>(pool_of(t).blocks) : -1; }

status kv_cache::write_block_table(layer_type t, std::span<const sequence_id> sequences, std::int64_t width,
                                   std::span<std::int32_t> out) const {
  if (width < 1 || out.size() != sequences.size() * static_cast<std::size_t>(width))
    return bad("write_block_table: " + std::to_string(out.size()) + " entries for " + std::to_string(sequences.size()) +
               " sequences of width " + std::to_string(width));
  std::fill(out.begin(), out.end(), -1);
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const auto it = sequences_.find(sequences[i]);
    if (it == sequences_.end()) return bad("write_block_table: no sequence " + std::to_string(sequences[i]));
    const auto& table = it->second.table[static_cast<int>(t)];
    if (static_cast<std::int64_t>(table.size()) > width)
      return bad("write_block_table: sequence " + std::to_string(sequences[i]) + " maps " + std::to_string(table.size()) + " " +
                 std::string(to_string(t)) + " blocks, more than the width " + std::to_string(width));
    std::copy(table.begin(), table.end(), out.begin() + static_cast<std::ptrdiff_t>(i * static_cast<std::size_t>(width)));
  }
  return status::ok();
}

host_buffer kv_cache::block_table(layer_type t, const std::vector<sequence_id>& sequences) const {
  std::size_t width = 1;
  for (sequence_id s : sequences) width = std::max(width, sequences_.at(s).table[static_cast<int>(t)].size());
  host_buffer out(dtype::int32, {static_cast<std::int64_t>(sequences.size()), static_cast<std::int64_t>(width)});
  std::int32_t* p = out.data<std::int32_t>();
  std::fill(p, p + out.numel(), -1);
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const auto& table = sequences_.at(sequences[i]).table[static_cast<int>(t)];
    std::copy(table.begin(), table.end(), p + i * width);
  }
  return out;
}

}  // namespace tandem::gpu
