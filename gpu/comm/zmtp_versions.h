// Which ZMTP revisions a socket that accepts connections talks to: only ZMTP 3 and later, always.
//
// Why: libzmq 4.3.4 (Debian 12's) aborts the whole process when a peer speaking ZMTP 1.0 or 2.0
// completes its greeting on a ROUTER while that socket closes: the engine hands the peer's
// routing id to a session that, terminating, has no pipe for it, and asserts
// (src/zmtp_engine.cpp:446, "Resource temporarily unavailable"). A stranger's random bytes on a
// run's port read as such a greeting (any first byte but 0xff), so a run shutting down under that
// traffic could lose a member to SIGABRT. ZeroMQ refuses pre-3.0 peers at their greeting on a
// socket with a ZAP domain; CURVE sockets have theirs, and a socket without CURVE gets one here.
// With no ZAP handler in its context, a ZMTP 3 peer then completes the NULL handshake as before
// (the domain is not enforced); such a socket must not share a context with a ZAP handler.
#pragma once

namespace zmq {
class socket_t;
}

namespace tandem::gpu {

/// Gives a socket without CURVE the ZAP domain "tandem-plain" before it binds, so that it refuses
/// peers older than ZMTP 3 (a CURVE socket refuses them already).
void refuse_pre_zmtp3_peers(zmq::socket_t& socket);

}  // namespace tandem::gpu
