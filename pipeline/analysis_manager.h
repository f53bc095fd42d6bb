#pragma once
// Analyses cached in a pipeline's context, invalidated by what each stage reports, as in
// LLVM's new pass manager (AnalysisManager, PreservedAnalyses).
//
// An analysis is any type A with
//
//   using Result = ...;                               (copyable or not; held shared and const)
//   static constexpr std::string_view name = "...";
//   Result run(Context& context) const;               (computes it from the context)
//
// A context that holds an AnalysisManager<Context> in a member named `analyses` has its
// analyses invalidated by the pipeline after every stage: a stage's run() returns the analyses
// it preserved (Task<PreservedAnalyses>), and a stage whose run() returns Task<void> preserves
// none (the safe default for a stage that does not say: it may have changed anything). A stage
// that computes an analysis as a by-product of its own work hands it over with store() and
// reports it preserved.
//
// Threading: an AnalysisManager belongs to one context, which one job at a time runs; it is not
// synchronized. Results are immutable once stored and shared by copies of the manager.
#include <algorithm>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace aotpipe {

namespace detail {
// One object per analysis type: its address is the analysis's identity (LLVM's AnalysisKey),
// unique across translation units because the variable is inline.
template <class Analysis>
inline constexpr char analysis_key = 0;
}  // namespace detail

// The analyses a stage left valid.
class PreservedAnalyses {
 public:
  static PreservedAnalyses all() {
    PreservedAnalyses preserved;
    preserved.all_ = true;
    return preserved;
  }
  static PreservedAnalyses none() { return {}; }

  template <class Analysis>
  PreservedAnalyses& preserve() {
    move_key(&detail::analysis_key<Analysis>, abandoned_, kept_);
    return *this;
  }
  // Not preserved, even by all(): for a stage that took the result over, or knows it stale.
  template <class Analysis>
  PreservedAnalyses& abandon() {
    move_key(&detail::analysis_key<Analysis>, kept_, abandoned_);
    return *this;
  }
  template <class Analysis>
  bool preserved() const {
    return preserved(&detail::analysis_key<Analysis>);
  }
  bool preserved(const void* key) const { return !contains(abandoned_, key) && (all_ || contains(kept_, key)); }
  bool preserves_all() const { return all_ && abandoned_.empty(); }

 private:
  static bool contains(const std::vector<const void*>& keys, const void* key) {
    return std::ranges::find(keys, key) != keys.end();
  }
  static void move_key(const void* key, std::vector<const void*>& from, std::vector<const void*>& to) {
    std::erase(from, key);
    if (!contains(to, key)) to.push_back(key);
  }
  bool all_ = false;
  std::vector<const void*> kept_;
  std::vector<const void*> abandoned_;
};

template <class Context>
class AnalysisManager {
 public:
  // The cached result of A, or null.
  template <class Analysis>
  const typename Analysis::Result* cached() const {
    const Entry* entry = find(&detail::analysis_key<Analysis>);
    return entry ? static_cast<const typename Analysis::Result*>(entry->result.get()) : nullptr;
  }

  // The result of A: the cached one, else computed by Analysis{}.run(context) and cached. The
  // reference stays valid until A is invalidated (copies of the result are cheap to keep: hold
  // what it shares).
  template <class Analysis>
  const typename Analysis::Result& get(Context& context) {
    if (const auto* result = cached<Analysis>()) return *result;
    return store<Analysis>(Analysis{}.run(context));
  }

  // Caches `result` as A's (replacing a cached one): for a stage that computed it anyway.
  template <class Analysis>
  const typename Analysis::Result& store(typename Analysis::Result result) {
    auto shared = std::make_shared<const typename Analysis::Result>(std::move(result));
    const auto* stored = shared.get();
    const void* key = &detail::analysis_key<Analysis>;
    if (Entry* entry = find(key)) {
      entry->result = std::move(shared);
    } else {
      entries_.push_back({key, Analysis::name, std::move(shared)});
    }
    return *stored;
  }

  // Drops every cached result that `preserved` does not name.
  void invalidate(const PreservedAnalyses& preserved) {
    if (preserved.preserves_all()) return;
    std::erase_if(entries_, [&](const Entry& entry) { return !preserved.preserved(entry.key); });
  }
  void clear() { entries_.clear(); }

  // The names of the cached analyses, in the order they were first cached (for reports and tests).
  std::vector<std::string_view> cached_names() const {
    std::vector<std::string_view> names;
    names.reserve(entries_.size());
    for (const Entry& entry : entries_) names.push_back(entry.name);
    return names;
  }

 private:
  struct Entry {
    const void* key;
    std::string_view name;
    std::shared_ptr<const void> result;
  };
  template <class Self>
  static auto* find_in(Self& self, const void* key) {
    auto it = std::ranges::find(self.entries_, key, &Entry::key);
    return it == self.entries_.end() ? nullptr : &*it;
  }
  Entry* find(const void* key) { return find_in(*this, key); }
  const Entry* find(const void* key) const { return find_in(*this, key); }

  std::vector<Entry> entries_;
};

// Whether a context type carries analyses the pipeline invalidates.
template <class Context>
concept HasAnalyses = requires(Context& context, const PreservedAnalyses& preserved) {
  context.analyses.invalidate(preserved);
};

}  // namespace aotpipe
