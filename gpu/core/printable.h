// Text from outside the process (a peer's hostname or error, a file's tensor name) made safe for
// one log line or a terminal: it can neither end the line nor drive the terminal.
#pragma once

#include <string>
#include <string_view>

namespace tandem::gpu {

/// `text` with every byte that could break a line or reach a terminal as a command shown as an
/// escape: "\n", "\r", "\t" and "\xHH" for the other C0 controls, DEL, bytes that are not
/// valid UTF-8, and the C1 controls and bidirectional overrides written in UTF-8 ("\u009b",
/// "\u202e"). Printable ASCII and other valid UTF-8 pass unchanged. Longer than `max_bytes`:
/// cut there (at a character boundary) with "...(N more bytes)". A backslash stays as it is, so
/// printable(printable(x)) == printable(x): text escaped once (a member's name) can pass through
/// another sink unchanged.
std::string printable(std::string_view text, std::size_t max_bytes = 4096);

}  // namespace tandem::gpu
