// The keys of one run (CurveZMQ): the controller's key pair and one key pair per member rank.
// Every socket of a run authenticates with them: a member proves it is rank r by holding rank
// r's secret key, the controller by holding its own; nobody else completes a handshake.
//
// Where they come from and go:
//   tandem run, every member spawned here:  made fresh for the run (make_run_keys); each spawned
//       member receives its credentials (credentials_for: the controller's public key, every
//       member's public key, its own secret key) on an inherited pipe named by TANDEM_KEYS_FD.
//   members started by hand or by a launcher:  `tandem keys FILE --world N` writes the file
//       (mode 0600, never overwritten); the controller and every such member read it from the
//       path in TANDEM_KEYS. A file readable by anyone but its owner is refused.
//
// File format (text, one record per line; a line whose first word starts with '#' is a comment):
//   tandem-keys 1
//   world 4
//   controller <public Z85> [<secret Z85>]
//   member <rank> <public Z85> [<secret Z85>]        one line per rank 0 .. world-1
// A secret key must belong to the public key beside it (checked), so a damaged file is refused
// with its line instead of failing handshakes later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/comm/curve_keys.h"
#include "gpu/core/status.h"

namespace tandem {

struct run_keys {
  std::int64_t world = 0;
  gpu::curve_keypair controller;           ///< secret_key empty in a member's credentials
  std::vector<gpu::curve_keypair> members;  ///< by rank; secret_key empty where not held
  bool operator==(const run_keys&) const = default;
};

/// Fresh random keys for a run of `world` members.
gpu::result<run_keys> make_run_keys(std::int64_t world);

/// What member `rank` needs: every public key and its own secret key, nothing else.
run_keys credentials_for(const run_keys& keys, std::int64_t rank);

/// The file text of `keys`.
std::string render_run_keys(const run_keys& keys);

/// Parses the text of a keys file; errors name `source` and the line ("keys.txt:4: ...").
gpu::result<run_keys> parse_run_keys(std::string_view text, const std::string& source);

/// Reads a keys file: refused when it is not a regular file owned by this user with no access for
/// group or others, or does not parse.
gpu::result<run_keys> read_run_keys_file(const std::string& path);

/// Writes `keys` to `path` with mode 0600: written beside it and linked into place, so the file
/// appears whole or not at all; an existing file is never replaced (invalid_argument).
gpu::status write_run_keys_file(const std::string& path, const run_keys& keys);

/// Reads credentials from an inherited descriptor to its end and closes it; `source` names it in
/// errors ("TANDEM_KEYS_FD=3").
gpu::result<run_keys> read_run_keys_fd(int fd, const std::string& source);

/// Checks that `keys` holds what `holder` needs: the controller ("controller") needs its secret
/// key; member r needs rank r's secret key; every public key for `world` ranks. The error names
/// what is missing and where the keys came from.
gpu::status check_run_keys_for(const run_keys& keys, std::int64_t world, std::int64_t rank_or_minus_one,
                               const std::string& source);

/// The keys a controller runs with: none when `secure` is false; the file named by $TANDEM_KEYS
/// when set (checked for `world` members); else fresh keys when all `world` members are spawned
/// here; else an error saying how to make the file the other members need.
gpu::result<std::optional<run_keys>> controller_keys(bool secure, std::int64_t world, std::int64_t spawned_here);

/// The keys a member runs with: from the descriptor in $TANDEM_KEYS_FD (a controller that
/// spawned it), else the file in $TANDEM_KEYS (a launcher), else none.
gpu::result<std::optional<run_keys>> member_keys_from_environment();

}  // namespace tandem
