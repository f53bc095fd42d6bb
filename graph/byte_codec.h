#pragma once
// ByteWriter / ByteReader: the compact binary form of a compiled artifact's header (what a
// cache hit reads before anything else, cache/artifact_serialization.cpp) and of the records the
// stages write into it (their runtime plans): LEB128 varints, length-prefixed strings, no field
// names. Reading CBOR into a DOM cost a cache hit more than everything else put together
// (docs/benchmarks.md); this costs a few allocations per artifact.
//
// The reader takes untrusted bytes: every read is bounds-checked, every count is bounded by the
// bytes left (a forged count makes it read until the bytes run out, then fail; what it reserves
// up front is capped), and any failure throws ByteFormatError naming what was being read.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

class ByteFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ByteWriter {
 public:
  void u64(std::uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  // Zigzag: small negative numbers stay short.
  void i64(std::int64_t v) { u64((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63)); }
  void boolean(bool v) { out_ += static_cast<char>(v ? 1 : 0); }
  void str(std::string_view s) {
    u64(s.size());
    out_ += s;
  }
  template <typename T, typename Put>
  void list(const std::vector<T>& items, Put put) {
    u64(items.size());
    for (const T& item : items) put(item);
  }
  void u64s(const std::vector<std::size_t>& v) {
    list(v, [this](std::size_t x) { u64(x); });
  }
  void i64s(const std::vector<std::int64_t>& v) {
    list(v, [this](std::int64_t x) { i64(x); });
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  std::uint64_t u64(const char* what) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto byte = static_cast<std::uint8_t>(take(1, what)[0]);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    fail(what, "a varint longer than 64 bits");
  }
  std::int64_t i64(const char* what) {
    const std::uint64_t z = u64(what);
    return static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  bool boolean(const char* what) {
    const char c = take(1, what)[0];
    if (c != 0 && c != 1) fail(what, "a boolean that is neither 0 nor 1");
    return c == 1;
  }
  std::string_view str(const char* what) { return take(count(what, 1), what); }
  // A count of items at least `min_item_bytes` long each: never more than the bytes left.
  std::size_t count(const char* what, std::size_t min_item_bytes = 1) {
    const std::uint64_t n = u64(what);
    if (min_item_bytes > 0 && n > in_.size() / min_item_bytes) fail(what, "a count larger than the bytes left");
    return static_cast<std::size_t>(n);
  }
  template <typename Get>
  auto list(const char* what, Get get) {
    const std::size_t n = count(what);
    std::vector<decltype(get())> items;
    items.reserve(std::min<std::size_t>(n, 1024));  // an item may be far larger than its minimum byte
    for (std::size_t i = 0; i < n; ++i) items.push_back(get());
    return items;
  }
  std::vector<std::size_t> u64s(const char* what) {
    return list(what, [&] { return static_cast<std::size_t>(u64(what)); });
  }
  std::vector<std::int64_t> i64s(const char* what) {
    return list(what, [&] { return i64(what); });
  }
  bool done() const { return in_.empty(); }

  [[noreturn]] static void fail(const char* what, const char* why) {
    throw ByteFormatError(std::string(what) + ": " + why);
  }

 private:
  std::string_view take(std::size_t n, const char* what) {
    if (n > in_.size()) fail(what, "truncated");
    const std::string_view out = in_.substr(0, n);
    in_.remove_prefix(n);
    return out;
  }
  std::string_view in_;
};

}  // namespace aotpipe
