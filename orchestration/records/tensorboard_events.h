// A TensorBoard event file of scalars, DIR/events.out.tfevents.<unix seconds>.<hostname>, written
// whole record by whole record as record_file.h writes lines (both through record_appender.h).
//
// The file is a sequence of TFRecords, each
//   uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes | data | uint32 masked CRC32C of data
// with CRC32C the Castagnoli CRC (reflected polynomial 0x82f63b78) and the mask
// ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data is one `Event` protobuf, encoded
// here by hand (only these fields are used):
//   Event   { double wall_time = 1; int64 step = 2; oneof { string file_version = 3; Summary summary = 5; } }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first event holds only the wall time and file_version "brain.Event:2"; then one event per
// step holds every scalar of that step. Values are narrowed to float as simple_value is; a NaN or
// an infinity is written as it is (TensorBoard shows them), a double beyond float's range becomes
// an infinity.
//
// A resumed run reopens its own events file at the size its checkpoint recorded (reopen): the file
// is cut back to the end of the last event the checkpoint saw, which must be a whole event at or
// after the opening one, and later steps are appended after it.
//
//   (none) --open: a new file and its first event, or reopen: an existing one cut to an event's end--> open
//   open --add_scalars, written whole--> open
//        --add_scalars, short or failed write--> cut back to the last whole event --> failed
//   failed --add_scalars--> the same error, nothing written
// One writer (one thread) per file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "orchestration/records/file_error.h"
#include "orchestration/records/record_appender.h"

namespace tandem::records {

/// The CRC-32C (Castagnoli) of `data`; crc32c("123456789") == 0xe3069283.
std::uint32_t crc32c(std::string_view data);
/// A CRC as TFRecord stores it: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc(std::uint32_t crc);
/// `data` framed as one TFRecord (length, masked CRC of the length, data, masked CRC of the data).
std::string tfrecord(std::string_view data);

/// One scalar of a step: its tag ("train/loss") and value.
using tagged_scalar = std::pair<std::string, double>;

/// The Event protobuf that opens a file: wall_time and file_version "brain.Event:2".
std::string file_version_event(double wall_time);
/// The Event protobuf of one step: wall_time, step and a Summary of one simple_value per scalar,
/// in the order given.
std::string scalars_event(double wall_time, std::int64_t step, const std::vector<tagged_scalar>& scalars);

/// The wall clock now, in seconds since the Unix epoch.
double wall_seconds_now();

class tensorboard_events {
 public:
  /// Creates DIR/events.out.tfevents.<floor(wall_time)>.<hostname> (a new file, O_EXCL: when one
  /// of that name exists, the first free of NAME.1, NAME.2, ... up to NAME.99) and writes its
  /// first event. DIR must exist. Errors: cannot_create ("cannot create DIR/events...: No such
  /// file or directory"), cannot_write (the first event could not be written; the file is removed).
  static file_result<std::unique_ptr<tensorboard_events>> open(const std::filesystem::path& dir,
                                                               double wall_time = wall_seconds_now());

  /// Reopens the existing events file `file` of a run being resumed, cut back to its first `size`
  /// bytes (ftruncate, fsync) so that the next add_scalars follows the last event kept; size() is
  /// then `size`. It is never created. `size` must end an event, found by walking the records'
  /// length fields (each checked against its CRC) from the start, and must keep the opening event.
  /// Errors, each leaving the file unchanged: cannot_create ("cannot reopen PATH: No such file or
  /// directory", or another OS reason; "PATH holds N bytes, fewer than the M its checkpoint
  /// recorded"; "PATH: byte M is not the end of an event (it falls within the event at byte A)";
  /// "PATH: byte M is within the opening event"; "PATH: the event at byte A has a damaged length
  /// (its CRC does not match)"). cannot_write ("cannot cut PATH back to M bytes: REASON"): the cut
  /// itself failed (an I/O error), after which the file may be cut.
  static file_result<std::unique_ptr<tensorboard_events>> reopen(const std::filesystem::path& file, std::uint64_t size);

  /// What reopen(file, size) would refuse, checked without changing the file or keeping it open
  /// (so that several files can be checked before any is cut); nullopt when it would reopen. The
  /// same cannot_create errors as reopen.
  [[nodiscard]] static std::optional<file_error> check_reopen(const std::filesystem::path& file, std::uint64_t size);

  tensorboard_events(const tensorboard_events&) = delete;
  tensorboard_events& operator=(const tensorboard_events&) = delete;

  /// Appends one event holding every scalar of `step`, as one write(2) of its whole record, so it
  /// is in the file (handed to the OS; no fsync) when this returns; nullopt when written. Error:
  /// cannot_write ("cannot write PATH: No space left on device"); the file then holds exactly the
  /// events before this one and takes no more.
  [[nodiscard]] std::optional<file_error> add_scalars(std::int64_t step, const std::vector<tagged_scalar>& scalars,
                                                      double wall_time = wall_seconds_now());

  /// The failure that stopped this file, if any.
  const std::optional<file_error>& failure() const { return file_.failure(); }
  /// The bytes of the whole records written.
  std::uint64_t size() const { return file_.size(); }
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  tensorboard_events(int fd, std::filesystem::path path, std::uint64_t size = 0) : file_(fd, std::move(path), "event", size) {}
  /// Whether the file open on `fd` ends an event after its opening one at byte `size`
  /// (open_for_cut checked it holds them).
  static std::optional<file_error> check_event_end(int fd, const std::filesystem::path& path, std::uint64_t size);

  record_appender file_;
};

}  // namespace tandem::records
