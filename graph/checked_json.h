#pragma once
// JSON (and CBOR) read from files others wrote, with numbers converted only where the C++ type
// holds them exactly. nlohmann's get<T>() converts a number with a static_cast: 3.3e126 read as a
// uint64_t is undefined behaviour (tests/fuzz/package_fuzzer found it in a package manifest), -1
// read as a std::size_t is 2^64 - 1, 2.5 read as an int is 2. CheckedJson is nlohmann::json but
// for that: get<T>() of an arithmetic T other than bool throws nlohmann's type_error (302) for a
// value that is not an integer where T is integral, and its out_of_range (406) for one outside
// T's range. Arrays and maps of numbers convert element by element, checked the same way, and
// readers keep catching nlohmann::json::exception (one type for every basic_json).
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace aotpipe {

template <typename T, typename = void>
struct CheckedJsonSerializer : nlohmann::adl_serializer<T> {};

template <typename T>
struct CheckedJsonSerializer<T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>>> {
  template <typename BasicJson>
  static void from_json(const BasicJson& j, T& value) {
    using Unsigned = typename BasicJson::number_unsigned_t;
    using Signed = typename BasicJson::number_integer_t;
    using Float = typename BasicJson::number_float_t;
    if constexpr (std::is_integral_v<T>) {
      if (!j.is_number_integer())  // true for unsigned values too
        throw BasicJson::type_error::create(302, "expected an integer, found " + describe(j), &j);
      const bool fits = j.is_number_unsigned() ? std::in_range<T>(j.template get_ref<const Unsigned&>())
                                               : std::in_range<T>(j.template get_ref<const Signed&>());
      if (!fits) throw BasicJson::out_of_range::create(406, describe(j) + " is out of this field's range", &j);
      value = j.is_number_unsigned() ? static_cast<T>(j.template get_ref<const Unsigned&>())
                                     : static_cast<T>(j.template get_ref<const Signed&>());
    } else {
      if (!j.is_number()) throw BasicJson::type_error::create(302, "expected a number, found " + describe(j), &j);
      const double d = j.is_number_float()      ? static_cast<double>(j.template get_ref<const Float&>())
                       : j.is_number_unsigned() ? static_cast<double>(j.template get_ref<const Unsigned&>())
                                                : static_cast<double>(j.template get_ref<const Signed&>());
      if (std::isfinite(d) && std::fabs(d) > static_cast<double>(std::numeric_limits<T>::max()))
        throw BasicJson::out_of_range::create(406, describe(j) + " is out of this field's range", &j);
      value = static_cast<T>(d);
    }
  }

  template <typename BasicJson>
  static void to_json(BasicJson& j, T value) {
    nlohmann::adl_serializer<T>::to_json(j, value);
  }

 private:
  template <typename BasicJson>
  static std::string describe(const BasicJson& j) {
    return j.is_number() ? j.dump() : std::string(j.type_name());
  }
};

using CheckedJson = nlohmann::basic_json<std::map, std::vector, std::string, bool, std::int64_t, std::uint64_t, double,
                                         std::allocator, CheckedJsonSerializer>;

}  // namespace aotpipe
