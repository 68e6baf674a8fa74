// A file of whole records, one line each, written by the one writer that created it. Each record
// goes out as one write(2) of the whole line; a write that fails or falls short (a full disk, a
// file-size limit, an I/O error) is undone: the file is cut back (ftruncate) to its size before
// that record, so no partial line remains, and the error names the path and the OS reason. After
// a failure the file takes no more records (record_appender.h does the writing and the undoing;
// this adds the lines and a lock). The file is made new (O_EXCL): a writer never adds to a file it
// did not create, such as another run's. The one exception is a resumed run reopening its own
// file at the size its checkpoint recorded (reopen: the file is cut back to the end of the last
// record the checkpoint saw, and appends follow it), and its own controller.log (append_to).
//
//   (none) --create: a new file, or reopen: an existing one cut to a record's end--> open
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

  /// Reopens the existing record file `path` of a run being resumed, cut back to its first `size`
  /// bytes (ftruncate, fsync) so that the next append follows the last record kept; size() is then
  /// `size`. It is never created. Errors, each leaving the file unchanged: cannot_create ("cannot
  /// reopen PATH: No such file or directory", or another OS reason; "PATH holds N bytes, fewer than
  /// the M its checkpoint recorded"; "PATH: byte M is not the end of a record", when `size` > 0 and
  /// the M-th byte, at offset M-1, is not a newline). cannot_write ("cannot cut PATH back to M
  /// bytes: REASON"): the cut itself failed (an I/O error), after which the file may be cut.
  static file_result<std::shared_ptr<record_file>> reopen(const std::filesystem::path& path, std::uint64_t size);

  /// What reopen(path, size) would refuse, checked without changing the file or keeping it open
  /// (so that several files can be checked before any is cut); nullopt when it would reopen. The
  /// same cannot_create errors as reopen.
  [[nodiscard]] static std::optional<file_error> check_reopen(const std::filesystem::path& path, std::uint64_t size);

  /// Opens the existing file `path` for appending after all it holds, never cutting it (a resumed
  /// run's controller.log, which keeps the lines of every attempt); size() is then its size.
  /// Error: cannot_create ("cannot reopen PATH: No such file or directory", or another OS reason);
  /// nothing is then open.
  static file_result<std::shared_ptr<record_file>> append_to(const std::filesystem::path& path);

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
  record_file(int fd, std::filesystem::path path, std::uint64_t size = 0) : file_(fd, std::move(path), "record", size) {}
  /// Whether the file open on `fd` ends a record at byte `size` (open_for_cut checked it holds them).
  static std::optional<file_error> check_record_end(int fd, const std::filesystem::path& path, std::uint64_t size);

  mutable std::mutex mutex_;
  record_appender file_;  // guarded by mutex_ (its path never changes)
};

}  // namespace tandem::records
