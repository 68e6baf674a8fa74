// Strict JSON for the files tandem reads from a checkpoint directory (config.json, safetensors
// headers, model.safetensors.index.json): a syntax error names its line and column, a key given
// twice in one object is an error (most parsers silently keep the last), and nesting is bounded.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gpu/core/status.h"

namespace tandem::gpu {

/// The whole text of `file`; io_error "FILE: cannot open for reading" or "FILE: read failed".
result<std::string> read_text_file(const std::filesystem::path& file);

/// Parses `text`. Errors are invalid_argument and read "SOURCE: invalid JSON at line 3, column
/// 21: ...", "SOURCE: duplicate key 'text_config.hidden_size'" or "SOURCE: JSON nested deeper than
/// 64 levels". Never throws.
result<nlohmann::json> parse_json_strict(std::string_view text, const std::string& source, int max_depth = 64);

/// `text` quoted for a message, with control characters (C0, DEL, C1), quotes and backslashes escaped and cut
/// to `max_chars`: names from files reach terminals and logs only through this.
std::string quote_name(std::string_view text, std::size_t max_chars = 200);

}  // namespace tandem::gpu
