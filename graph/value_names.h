#pragma once
// The names of one graph's values (graph-internal): which value a name denotes, and fresh names.
//
// A fresh name is its hint followed by the next suffix of that hint (neg, neg_1, neg_2...): every
// recorded op makes one. Names given explicitly (inputs, parsed and copied graphs, renames) go in
// a hash table; fresh names do not. Each hint instead keeps the values it named, indexed by
// suffix, so a name is found by splitting off its suffix, and a new fresh name is known free
// unless an explicit name or an overlapping hint (one hint is another plus "_N") could hold it,
// which only those cases check. Inserting every traced value into the table cost a BERT layer's
// trace 10% (hashing, and the table's growth, whose large allocations consolidate malloc's bins).
#include <boost/unordered/unordered_flat_map.hpp>
#include <c10/util/SmallVector.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

class Value;

namespace detail {

class ValueNames {
 public:
  // The value named `name`; null when none is.
  Value* find(std::string_view name) const;
  // Records `value` under its own name, which was given explicitly; false when that name is taken.
  bool add_named(Value* value);
  // Writes into `name` the first free name of the hint's sequence (an empty hint is "v") and
  // records `value` under it. `name` is the value's own name string: the index views it.
  void add_fresh(Value* value, std::string& name, std::string_view hint);
  // The name add_fresh would give next, reserved (later fresh names skip it) but naming nothing.
  std::string reserve_fresh(std::string_view hint);
  // Forgets `value`'s name (its value is renamed or erased): the name is free again.
  void remove(const Value* value);
  // This index for a copy of the graph `other` indexes: `map` takes each of its values to the copy.
  void copy_from(const ValueNames& other, const std::function<Value*(const Value*)>& map);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  // The values one hint named: issued[k] has the k-th name of the sequence (hint, hint_1...);
  // null once it was renamed or erased, or when that name was skipped (taken) or only reserved.
  // Most hints name one or two values of a graph.
  struct Sequence {
    std::string hint;
    std::size_t prefix_size;  // of `hint` without a "_N" ending; npos when it has none
    c10::SmallVector<Value*, 2> issued;
  };

  const Sequence* sequence(std::string_view hint) const;
  Sequence& sequence_for(std::string_view hint);
  // Calls f(Value* const*) on the slots a fresh name would occupy: (name, 0), and (prefix, N)
  // when name is prefix_N.
  template <class F>
  void for_each_slot(std::string_view name, F&& f) const;
  // Appends the next name of `seq` to `out` (assigned) and reserves its slot.
  void next_candidate(Sequence& seq, std::string& out);
  // Whether an explicit name, or another hint's sequence, holds a candidate of this one.
  bool taken_outside(std::string_view candidate) const;

  // Explicit names; keys view Value::name() of the value they map to (values never move).
  boost::unordered_flat_map<std::string_view, Value*, Hash, std::equal_to<>> named_;
  // Which explicit names there may be (never cleared: removing a name leaves a false positive):
  // a fresh name that misses it is not looked up in named_ at all.
  struct Filter {
    static constexpr std::size_t kBits = 256;
    std::array<std::uint64_t, kBits / 64> bits{};
    void add(std::string_view name);
    bool may_contain(std::string_view name) const;
    static std::size_t slot(std::string_view name);
  };
  Filter named_filter_;
  // A graph uses few hints (one per kind of op): scanned, past kScannedHints also found through
  // a table of positions. Each on its own allocation, so that no allocation grows past a
  // kilobyte while a small graph is made (one that large makes glibc consolidate its bins).
  static constexpr std::size_t kScannedHints = 32;
  std::vector<std::unique_ptr<Sequence>> sequences_;
  std::vector<std::uint64_t> fingerprints_;  // of each sequence's hint (few bytes): scanned first
  boost::unordered_flat_map<std::string, Sequence*, Hash, std::equal_to<>> sequence_of_hint_;
  // Two hints whose sequences can meet (a and a_1): fresh names then check every sequence.
  bool overlapping_hints_ = false;
};

}  // namespace detail
}  // namespace aotpipe
