// The write-or-cut-back step shared by the record files (record_file.h: lines; tensorboard_events.h:
// TFRecord events): a file descriptor, owned, at the end of a file that holds only whole records.
// Each record goes out as one write(2); a write that falls short (a size limit, a full disk, a
// signal) is tried once more for the rest, which either completes the record or says why it cannot
// be. A record that cannot be written whole is undone: the file is cut back (ftruncate) to its size
// before that record, so no partial record remains, and the error names the path and the OS reason.
// After a failure the file takes no more records. Not locked: its owner serialises the calls.
// The file is a new one (size 0) or, for a resumed run, its own file cut back to the size its
// checkpoint recorded (open_for_cut, then cut_to), so the next record follows the last one kept.
//
//   open --append, written whole--> open
//        --append, short or failed write--> cut back to the last whole record --> failed
//   failed --append--> the same error, nothing written
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "orchestration/records/file_error.h"

namespace tandem::records {

class record_appender {
 public:
  /// Takes `fd` (open for writing, positioned at the end of a file of `size` bytes of whole
  /// records: 0 for a new one) and closes it when destroyed. `unit` names a record in the error of
  /// a failed cut-back ("record", "event").
  record_appender(int fd, std::filesystem::path path, std::string unit, std::uint64_t size = 0);
  ~record_appender();
  record_appender(const record_appender&) = delete;
  record_appender& operator=(const record_appender&) = delete;

  /// Appends `record` whole or not at all; nullopt when written. Error: cannot_write ("cannot
  /// write PATH: No space left on device", with " (and cannot cut it back to its last whole UNIT at
  /// byte N: REASON)" when the undo failed too); the file then holds exactly the records before
  /// this one.
  [[nodiscard]] std::optional<file_error> append(std::string_view record);

  /// The failure that stopped this file, if any.
  const std::optional<file_error>& failure() const { return failure_; }
  /// The bytes of the whole records written.
  std::uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  int fd_ = -1;
  std::filesystem::path path_;
  std::string unit_;
  std::uint64_t size_ = 0;
  std::optional<file_error> failure_;
};

/// Opens the existing file `path` read and write (O_RDWR, never O_CREAT) for a cut to its first
/// `size` bytes, which it must hold; `fd` gets the descriptor, which the caller then owns, and `fd`
/// is -1 on an error. Nothing in the file changes. Errors: cannot_create ("cannot reopen PATH: No
/// such file or directory", or another OS reason; "PATH holds N bytes, fewer than the M its
/// checkpoint recorded").
[[nodiscard]] std::optional<file_error> open_for_cut(const std::filesystem::path& path, std::uint64_t size, int& fd);

/// Cuts the file open on `fd` (open_for_cut) to its first `size` bytes (ftruncate, then fsync, so
/// the cut survives a crash) and positions `fd` at its end, where the next record goes. On an error
/// `fd` is closed and set to -1. Error: cannot_write ("cannot cut PATH back to N bytes: REASON"); the
/// file may then be cut or not.
[[nodiscard]] std::optional<file_error> cut_to(int& fd, const std::filesystem::path& path, std::uint64_t size);

}  // namespace tandem::records
