// Ring reduction steps per element type (contract in zmq_reduce.h).
#include "gpu/comm/zmq_reduce.h"

#include <cstring>
#include <type_traits>

#include "gpu/core/half.h"

namespace tandem::gpu::zmq_reduce {
namespace {

/// Storage type T, partial type P, and the conversions between them.
template <class T>
struct elem {
  using P = T;
  static P widen(T x) { return x; }
  static T narrow(P x) { return x; }
};
template <>
struct elem<bfloat16> {
  using P = float;
  static P widen(bfloat16 x) { return to_float(x); }
  static bfloat16 narrow(P x) { return to_bfloat16(x); }
};
template <>
struct elem<float16> {
  using P = float;
  static P widen(float16 x) { return to_float(x); }
  static float16 narrow(P x) { return to_float16(x); }
};

template <class U>
U load(const std::byte* p, std::int64_t i) {
  U v;
  std::memcpy(&v, p + static_cast<std::size_t>(i) * sizeof(U), sizeof(U));
  return v;
}

template <class U>
void store(std::byte* p, std::int64_t i, U v) {
  std::memcpy(p + static_cast<std::size_t>(i) * sizeof(U), &v, sizeof(U));
}

template <class P>
struct sum_op {
  P operator()(P acc, P v) const {
    if constexpr (std::is_same_v<P, std::int32_t>)  // wraps like int64 accumulation truncated to int32
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(acc) + static_cast<std::uint32_t>(v));
    else return acc + v;
  }
};
template <class P>
struct max_op {
  P operator()(P acc, P v) const { return v > acc ? v : acc; }
};

template <class T, class Op>
void add_loop(std::byte* partial, const std::byte* mine, std::int64_t n) {
  using E = elem<T>;
  using P = typename E::P;
  const Op op;
  for (std::int64_t i = 0; i < n; ++i) store<P>(partial, i, op(load<P>(partial, i), E::widen(load<T>(mine, i))));
}

template <class T, class Op>
void finish_loop(std::byte* out, const std::byte* partial, const std::byte* mine, std::int64_t n) {
  using E = elem<T>;
  using P = typename E::P;
  const Op op;
  for (std::int64_t i = 0; i < n; ++i) store<T>(out, i, E::narrow(op(load<P>(partial, i), E::widen(load<T>(mine, i)))));
}

/// Calls f(T{}) with the storage type of `type`.
template <class F>
void with_type(dtype type, F&& f) {
  switch (type) {
    case dtype::float32: return f(float{});
    case dtype::float64: return f(double{});
    case dtype::int32: return f(std::int32_t{});
    case dtype::bfloat16: return f(bfloat16{});
    case dtype::float16: return f(float16{});
    case dtype::uint8: return;  // bytes are never reduced: zmq_group refuses the call first
  }
}

}  // namespace

std::size_t partial_size_of(dtype type) {
  return type == dtype::bfloat16 || type == dtype::float16 ? sizeof(float) : size_of(type);
}

void start_partial(dtype type, std::byte* partial, const std::byte* mine, std::int64_t n) {
  if (n <= 0) return;  // the buffers of an empty chunk may be null
  with_type(type, [&](auto t) {
    using T = decltype(t);
    using E = elem<T>;
    if constexpr (std::is_same_v<typename E::P, T>) std::memcpy(partial, mine, static_cast<std::size_t>(n) * sizeof(T));
    else
      for (std::int64_t i = 0; i < n; ++i) store<typename E::P>(partial, i, E::widen(load<T>(mine, i)));
  });
}

void add_to_partial(dtype type, reduce_op op, std::byte* partial, const std::byte* mine, std::int64_t n) {
  with_type(type, [&](auto t) {
    using T = decltype(t);
    using P = typename elem<T>::P;
    if (op == reduce_op::sum) add_loop<T, sum_op<P>>(partial, mine, n);
    else add_loop<T, max_op<P>>(partial, mine, n);
  });
}

void finish_partial(dtype type, reduce_op op, std::byte* out, const std::byte* partial, const std::byte* mine, std::int64_t n) {
  with_type(type, [&](auto t) {
    using T = decltype(t);
    using P = typename elem<T>::P;
    if (op == reduce_op::sum) finish_loop<T, sum_op<P>>(out, partial, mine, n);
    else finish_loop<T, max_op<P>>(out, partial, mine, n);
  });
}

}  // namespace tandem::gpu::zmq_reduce
