#include "value_names.h"

#include <aotpipe/graph/graph.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <utility>

namespace aotpipe::detail {

namespace {

// "neg_12" -> ("neg", 12): a suffix as fresh names write it (no sign, no leading zero, >= 1).
std::optional<std::pair<std::string_view, std::size_t>> split_suffix(std::string_view name) {
  const std::size_t underscore = name.rfind('_');
  if (underscore == std::string_view::npos || underscore + 1 == name.size() || name[underscore + 1] == '0')
    return std::nullopt;
  std::size_t k = 0;
  const char* first = name.data() + underscore + 1;
  const char* last = name.data() + name.size();
  const auto [end, ec] = std::from_chars(first, last, k);
  if (ec != std::errc() || end != last) return std::nullopt;
  return std::pair{name.substr(0, underscore), k};
}

// Tells most unequal short strings apart from a few of their bytes (size, head, tail).
std::uint64_t fingerprint(std::string_view s) {
  std::uint64_t fp = s.size();
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 4); ++i) fp = fp * 257 + static_cast<unsigned char>(s[i]);
  for (std::size_t i = n > 8 ? n - 4 : std::min<std::size_t>(n, 4); i < n; ++i)
    fp = fp * 257 + static_cast<unsigned char>(s[i]);
  return fp;
}

}  // namespace

void ValueNames::Filter::add(std::string_view name) { bits[slot(name) / 64] |= std::uint64_t{1} << (slot(name) % 64); }
bool ValueNames::Filter::may_contain(std::string_view name) const {
  return (bits[slot(name) / 64] >> (slot(name) % 64)) & 1;
}
std::size_t ValueNames::Filter::slot(std::string_view name) {
  if (name.empty()) return 0;
  return (name.size() * 131 + static_cast<unsigned char>(name.front()) * 31 + static_cast<unsigned char>(name.back())) %
         kBits;
}

const ValueNames::Sequence* ValueNames::sequence(std::string_view hint) const {
  if (!sequence_of_hint_.empty()) {
    auto it = sequence_of_hint_.find(hint);
    return it == sequence_of_hint_.end() ? nullptr : it->second;
  }
  const std::uint64_t fp = fingerprint(hint);
  for (std::size_t i = 0; i < fingerprints_.size(); ++i)
    if (fingerprints_[i] == fp && sequences_[i]->hint == hint) return sequences_[i].get();
  return nullptr;
}

ValueNames::Sequence& ValueNames::sequence_for(std::string_view hint) {
  if (const Sequence* seq = sequence(hint)) return const_cast<Sequence&>(*seq);
  const auto split = split_suffix(hint);
  const std::size_t prefix_size = split ? split->first.size() : std::string_view::npos;
  // Another hint's names meet this one's when one hint is the other plus "_N".
  for (const auto& seq : sequences_)
    overlapping_hints_ = overlapping_hints_ || (split && split->first == seq->hint) ||
                         std::string_view(seq->hint).substr(0, seq->prefix_size) == hint;
  if (sequences_.empty()) {
    sequences_.reserve(16);
    fingerprints_.reserve(16);
  }
  fingerprints_.push_back(fingerprint(hint));
  Sequence& seq = *sequences_.emplace_back(std::make_unique<Sequence>(Sequence{std::string(hint), prefix_size, {}}));
  if (!sequence_of_hint_.empty()) {
    sequence_of_hint_.emplace(seq.hint, &seq);
  } else if (sequences_.size() > kScannedHints) {
    for (const auto& s : sequences_) sequence_of_hint_.emplace(s->hint, s.get());
  }
  return seq;
}

template <class F>
void ValueNames::for_each_slot(std::string_view name, F&& f) const {
  if (sequences_.empty()) return;
  if (const Sequence* seq = sequence(name); seq && !seq->issued.empty()) f(&seq->issued[0]);
  if (const auto split = split_suffix(name))
    if (const Sequence* seq = sequence(split->first); seq && split->second < seq->issued.size())
      f(&seq->issued[split->second]);
}

Value* ValueNames::find(std::string_view name) const {
  if (!named_.empty())
    if (auto it = named_.find(name); it != named_.end()) return it->second;
  Value* found = nullptr;
  for_each_slot(name, [&](Value* const* slot) {
    if (*slot) found = *slot;
  });
  return found;
}

bool ValueNames::add_named(Value* value) {
  if (find(value->name())) return false;
  named_.emplace(std::string_view(value->name()), value);
  named_filter_.add(value->name());
  return true;
}

void ValueNames::next_candidate(Sequence& seq, std::string& out) {
  out.assign(seq.hint);
  if (const std::size_t k = seq.issued.size(); k != 0) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, k).ptr;
    out.push_back('_');
    out.append(digits, end);
  }
  seq.issued.push_back(nullptr);
}

// Names of the same sequence never repeat; another sequence can only hold the candidate when
// the hints overlap.
bool ValueNames::taken_outside(std::string_view candidate) const {
  if (named_filter_.may_contain(candidate) && named_.contains(candidate)) return true;
  if (!overlapping_hints_) return false;
  bool taken = false;
  for_each_slot(candidate, [&](Value* const* slot) { taken = taken || *slot != nullptr; });
  return taken;
}

void ValueNames::add_fresh(Value* value, std::string& name, std::string_view hint) {
  Sequence& seq = sequence_for(hint.empty() ? std::string_view("v") : hint);
  do next_candidate(seq, name);
  while (taken_outside(name));
  seq.issued.back() = value;
}

std::string ValueNames::reserve_fresh(std::string_view hint) {
  Sequence& seq = sequence_for(hint.empty() ? std::string_view("v") : hint);
  std::string name;
  do next_candidate(seq, name);
  while (taken_outside(name));
  return name;
}

void ValueNames::remove(const Value* value) {
  const std::string_view name = value->name();
  if (auto it = named_.find(name); it != named_.end() && it->second == value) {
    named_.erase(it);
    return;
  }
  // The slot is this index's own (a const view for find's sake).
  for_each_slot(name, [&](Value* const* slot) {
    if (*slot == value) *const_cast<Value**>(slot) = nullptr;
  });
}

void ValueNames::copy_from(const ValueNames& other, const std::function<Value*(const Value*)>& map) {
  named_.clear();
  named_.reserve(other.named_.size());
  for (const auto& [name, value] : other.named_) {
    Value* copy = map(value);
    named_.emplace(std::string_view(copy->name()), copy);
  }
  named_filter_ = other.named_filter_;
  sequences_.clear();
  sequence_of_hint_.clear();
  sequences_.reserve(other.sequences_.size());
  fingerprints_ = other.fingerprints_;
  for (const auto& seq : other.sequences_) {
    Sequence& mine = *sequences_.emplace_back(std::make_unique<Sequence>(Sequence{seq->hint, seq->prefix_size, {}}));
    mine.issued.reserve(seq->issued.size());
    for (const Value* v : seq->issued) mine.issued.push_back(v ? map(v) : nullptr);
    if (!other.sequence_of_hint_.empty()) sequence_of_hint_.emplace(mine.hint, &mine);
  }
  overlapping_hints_ = other.overlapping_hints_;
}

}  // namespace aotpipe::detail
