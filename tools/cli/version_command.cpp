// `tandem --version`: the version and what this build can compute on.
#include <caf/config.hpp>
#include <yaml-cpp/yaml.h>
#include <zmq.h>

#include "gpu/core/device_query.h"
#include "tools/cli/commands.h"

namespace tandem::cli {

int version_command(std::ostream& out) {
  out << "tandem " << TANDEM_VERSION << "\n";
  const gpu::backend_info b = gpu::query_backend();
  out << "backends: cpu (float32 reference)";
  if (b.cuda_built)
    out << ", cuda (runtime " << b.cuda_runtime << ", cuBLAS " << b.cublas << ", NCCL " << b.nccl << ")";
  out << "\n";
  if (!b.devices.empty()) {
    for (const auto& d : b.devices)
      out << "device cuda:" << d.index << ": " << d.name << ", " << d.total_bytes / (1024 * 1024) << " MiB, sm_"
          << d.compute_major << d.compute_minor << "\n";
  } else {
    out << "devices: none (" << b.device_problem << ")\n";
  }
  int zmaj = 0, zmin = 0, zpat = 0;
  zmq_version(&zmaj, &zmin, &zpat);
  out << "libraries: CAF " << CAF_MAJOR_VERSION << "." << CAF_MINOR_VERSION << "." << CAF_PATCH_VERSION
      << ", ZeroMQ " << zmaj << "." << zmin << "." << zpat << "\n";
  return exit_ok;
}

}  // namespace tandem::cli
