// ZMTP revisions a listening socket accepts (zmtp_versions.h).
#include "gpu/comm/zmtp_versions.h"

#include <zmq.hpp>

namespace tandem::gpu {

void refuse_pre_zmtp3_peers(zmq::socket_t& socket) {
  // ZeroMQ enforces a domain only with ZMQ_ZAP_ENFORCE_DOMAIN (a draft option, off): without a
  // handler the NULL handshake goes on.
  socket.set(zmq::sockopt::zap_domain, "tandem-plain");
}

}  // namespace tandem::gpu
