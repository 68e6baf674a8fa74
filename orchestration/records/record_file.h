// A file of whole records, one line each, written by the one writer that created it. Each record
// goes out as one write(2) of the whole line; a write that fails or falls short (a full disk, a
// file-size limit, an I/O error) is undone: the file is cut back (ftruncate) to its size before
// that record, so no partial line remains, and the error names the path and the OS reason. After
// a failure the file takes no more records (record_appender.h does the writing and the undoing;
// this adds the lines and a lock). The file is made new (O_EXCL): a writer never adds to a file it
// did not create, such as another run's.
//
//   open --append, written whole--> open
//        --append, short or failed write--> cut back to the last whole record --> failed
//   failed --append--> the same error, nothing written
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "orchestration/records/file_error.h"
#include "orchestration/records/record_appender.h"

namespace tandem::records {

class record_file {
 public:
  /// Creates `path`, which must not exist (O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode 0644).
  /// Error: cannot_create ("cannot create PATH: File exists").
  static file_result<std::shared_ptr<record_file>> create(const std::filesystem::path& path);

  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;

  /// Appends `line` (one line, without its newline) and a newline, whole or not at all; nullopt
  /// when written. Error: cannot_write ("cannot write PATH: No space left on device"); the file
  /// then holds exactly the records before this one. Safe to call from several threads.
  [[nodiscard]] std::optional<file_error> append(std::string_view line);

  /// The failure that stopped this file, if any.
  std::optional<file_error> failure() const;
  /// The bytes of the whole records written.
  std::uint64_t size() const;
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  record_file(int fd, std::filesystem::path path) : file_(fd, std::move(path), "record") {}

  mutable std::mutex mutex_;
  record_appender file_;  // guarded by mutex_ (its path never changes)
};

}  // namespace tandem::records
