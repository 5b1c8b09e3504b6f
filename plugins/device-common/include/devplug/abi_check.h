// Helpers for the compile-time checks that compare a plugin's own declarations of a vendor API
// with the vendor's real header (plugins/device-*/abi_check.cpp, built when the header exists).
//
// Our declarations live in a namespace, so their types differ from the header's even when they
// are the same. TypeMap translates a type of ours into the header's, one specialisation per named
// type (DP_ABI_SAME_TYPE), and structurally through pointers, const and function types; every
// other type (int, size_t, unsigned long long ...) must be identical. So
//   DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemAlloc_v2, ::cuMemAlloc_v2)
// fails to compile unless the real function has exactly our prototype.
#pragma once

#include <type_traits>

namespace hmc::devplug::abi {

template <class T>
struct TypeMap {
  using type = T;
};
template <class T>
using mapped_t = typename TypeMap<T>::type;
template <class T>
struct TypeMap<T*> {
  using type = mapped_t<T>*;
};
template <class T>
struct TypeMap<const T> {
  using type = const mapped_t<T>;
};
template <class R, class... A>
struct TypeMap<R(A...)> {
  using type = mapped_t<R>(mapped_t<A>...);
};

}  // namespace hmc::devplug::abi

// Declares that our type `ours` stands for the header's `theirs` (at namespace scope).
#define DP_ABI_SAME_TYPE(ours, theirs)      \
  template <>                               \
  struct hmc::devplug::abi::TypeMap<ours> { \
    using type = theirs;                    \
  }

#define DP_ABI_CHECK_FUNCTION(our_pfn, their_function)                                           \
  static_assert(std::is_same_v<hmc::devplug::abi::mapped_t<our_pfn>, decltype(&their_function)>, \
                #their_function " has another prototype than " #our_pfn)

#define DP_ABI_CHECK_VALUE(ours, theirs)                                        \
  static_assert(static_cast<long long>(ours) == static_cast<long long>(theirs), \
                #ours " differs from " #theirs)

// Same size and the same underlying type (an enum's representation).
#define DP_ABI_CHECK_ENUM(ours, theirs)                                                           \
  static_assert(sizeof(ours) == sizeof(theirs) &&                                                 \
                    std::is_same_v<std::underlying_type_t<ours>, std::underlying_type_t<theirs>>, \
                #ours " and " #theirs " have different representations")

#define DP_ABI_CHECK_SIZE(ours, theirs) \
  static_assert(sizeof(ours) == sizeof(theirs), #ours " and " #theirs " differ in size")

#define DP_ABI_CHECK_OFFSET(ours, our_field, theirs, their_field)           \
  static_assert(offsetof(ours, our_field) == offsetof(theirs, their_field), \
                #ours "::" #our_field " is not where " #theirs "::" #their_field " is")
