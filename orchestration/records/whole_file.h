// A file written whole or not at all: the text goes to PATH.tmp, is synced, then renamed over
// PATH, so a reader (or a crash) sees either no file or all of it.
#pragma once

#include <filesystem>
#include <functional>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "orchestration/records/file_error.h"

namespace tandem::records {

/// Writes `text` to `path` through `path`.tmp and rename(2); nullopt when done. Errors:
/// cannot_create ("cannot create PATH.tmp: REASON"), cannot_write ("cannot write PATH: REASON");
/// on an error neither PATH nor PATH.tmp is left behind by this call.
/// `synced`, when given, runs once the text is in PATH.tmp and synced, just before the rename (a
/// resumed run's fault-injection tests kill the process there).
[[nodiscard]] std::optional<file_error> write_whole_file(const std::filesystem::path& path, std::string_view text,
                                                        const std::function<void()>& synced = {});

/// The first `bytes` bytes of `path` into `out`; nullopt when read. Errors: cannot_create ("cannot
/// read PATH: REASON", also when the file is shorter than `bytes`).
[[nodiscard]] std::optional<file_error> read_prefix(const std::filesystem::path& path, std::uint64_t bytes, std::string& out);

}  // namespace tandem::records
