// What a policy rank is asked to save or load and what it answers: one definition for the policy
// workers' messages and the control plane (orchestration/control/messages.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "plain/fields.h"

namespace tandem::plain {

/// What a save writes.
///   engine_state: the rank's weights and optimizer state, through the train engine's save(): for
///                 the Gemma 4 engines a Hugging Face checkpoint directory (with the optimizer's
///                 moments and step count beside the weights), written beside `directory` and
///                 renamed into place, replacing what is there.
///   attestation:  a data-parallel rank's part of a step checkpoint whose state another rank
///                 writes (the ranks hold the same weights): a small JSON file at `directory`
///                 naming the rank, its version and its weights digest, synced and renamed into
///                 place, so the controller commits the checkpoint only when every rank vouched
///                 for the same weights.
enum class save_part : std::uint8_t { engine_state = 0, attestation = 1 };

constexpr bool known(save_part p) { return p == save_part::engine_state || p == save_part::attestation; }

struct save_job {
  static constexpr const char* type_name = "save_job";
  std::uint64_t version = 0;  ///< the weights to save; refused (stale_version) unless current
  std::string directory;      ///< absolute, on a filesystem the rank can write (attestation: the file's path)
  save_part part = save_part::engine_state;
  bool operator==(const save_job&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, save_job& x) {
    return f(named("version", x.version), named("directory", x.directory), named("part", x.part));
  }
};

struct save_report {
  static constexpr const char* type_name = "save_report";
  std::string worker;         ///< the policy rank that saved
  std::uint64_t version = 0;  ///< the version saved
  std::string directory;      ///< where it is, complete
  std::uint64_t weights_digest = 0;  ///< the engine's digest of the weights saved (0: it has none)
  bool operator==(const save_report&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, save_report& x) {
    return f(named("worker", x.worker), named("version", x.version), named("directory", x.directory),
             named("weights_digest", x.weights_digest));
  }
};

/// Load what an engine_state save wrote into the rank's engine (a resumed run), and make
/// `version` the rank's weight version: every rank of the run loads the same checkpoint.
struct load_job {
  static constexpr const char* type_name = "load_job";
  std::uint64_t version = 0;  ///< the version the checkpoint holds (the rank's version afterwards)
  std::string directory;      ///< absolute: the engine_state save's directory
  bool operator==(const load_job&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, load_job& x) {
    return f(named("version", x.version), named("directory", x.directory));
  }
};

struct load_report {
  static constexpr const char* type_name = "load_report";
  std::string worker;         ///< the policy rank that loaded
  std::uint64_t version = 0;  ///< its version now
  std::uint64_t weights_digest = 0;  ///< the engine's digest of the weights loaded (0: it has none)
  bool operator==(const load_report&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, load_report& x) {
    return f(named("worker", x.worker), named("version", x.version), named("weights_digest", x.weights_digest));
  }
};

}  // namespace tandem::plain
