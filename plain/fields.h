// The one field list of a plain-data struct. Every struct of plain/ lists its fields once, in a
// static member template `fields(f, x)` that calls f(field(name, member)...) in declaration
// order; every reader of the struct goes through that list:
//
//   the control-plane codec (orchestration/control/codec.cpp) walks it to size, write and read a
//   struct field by field, naming the field in its errors;
//   CAF's inspection (caf::inspect, found by argument-dependent lookup here) gets the members in
//   the same order, so a struct in a CAF message needs no second description.
//
// So adding a field is one line in one place. This module includes nothing of tandem's: gpu/,
// orchestration/ and actors/ all use it.
#pragma once

#include <concepts>
#include <utility>

namespace tandem::plain {

/// A member and the name the codec's errors use for it.
template <class T>
struct field {
  const char* name;
  T& value;
};

template <class T>
field<T> named(const char* name, T& value) {
  return {name, value};
}

namespace detail {
/// A visitor type to name `fields` with.
struct any_visit {
  template <class... A>
  int operator()(A&&...) const { return 0; }
};
/// The struct a `fields` list belongs to: the type of its second parameter.
template <class P>
struct fields_owner {};
template <class R, class V, class O>
struct fields_owner<R (*)(V, O&)> {
  using type = O;
};
}  // namespace detail

/// A struct of this module: it has the static `fields` list, its own (a struct that derives from
/// a plain struct and adds members is not one: its inherited list would drop them).
template <class T>
concept plain_struct = requires(T& x) {
  { T::type_name } -> std::convertible_to<const char*>;
  T::fields(detail::any_visit{}, x);
} && std::same_as<typename detail::fields_owner<decltype(&T::template fields<detail::any_visit>)>::type, T>;

/// Calls visit(name, member) for every member of `x`, in order.
template <plain_struct T, class Visit>
void for_each_field(T& x, Visit&& visit) {
  T::fields([&](auto... f) { (visit(f.name, f.value), ...); }, x);
}
template <plain_struct T, class Visit>
void for_each_field(const T& x, Visit&& visit) {
  T::fields([&](auto... f) { (visit(f.name, std::as_const(f.value)), ...); }, const_cast<T&>(x));
}

/// CAF's inspection of a plain struct: its members in field order (CAF finds it by
/// argument-dependent lookup; no CAF header is needed here).
template <class Inspector, plain_struct T>
typename Inspector::result_type inspect(Inspector& f, T& x) {
  return T::fields([&](auto... m) { return f(m.value...); }, x);
}

}  // namespace tandem::plain
