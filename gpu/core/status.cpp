// Names of status codes.
#include "gpu/core/status.h"

namespace tandem::gpu {

const char* to_string(status_code code) {
  switch (code) {
    case status_code::ok: return "ok";
    case status_code::invalid_argument: return "invalid_argument";
    case status_code::not_found: return "not_found";
    case status_code::io_error: return "io_error";
    case status_code::unsupported: return "unsupported";
    case status_code::device_error: return "device_error";
    case status_code::out_of_memory: return "out_of_memory";
  }
  return "unknown";
}

}  // namespace tandem::gpu
