#include <aotpipe/pipeline/thread_context.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>

namespace aotpipe {
namespace detail {

struct PropagatorSet {
  struct Entry {
    std::uint64_t id;
    std::shared_ptr<const ContextPropagator> propagator;
  };
  std::vector<Entry> entries;
};

namespace {

// Readers (every suspension) load the current set with one acquire load and never lock.
// Writers build a new immutable set under the mutex and publish it. Superseded sets are kept
// until exit because a suspended coroutine may still hold a snapshot pointing into one.
class PropagatorRegistry {
 public:
  const PropagatorSet* current() const noexcept { return current_.load(std::memory_order_acquire); }

  std::uint64_t add(ContextPropagator propagator) {
    std::lock_guard lock(mutex_);
    PropagatorSet next = *current();
    const std::uint64_t id = ++last_id_;
    next.entries.push_back({id, std::make_shared<const ContextPropagator>(std::move(propagator))});
    publish(std::move(next));
    return id;
  }

  void remove(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    PropagatorSet next = *current();
    std::erase_if(next.entries, [id](const PropagatorSet::Entry& e) { return e.id == id; });
    publish(std::move(next));
  }

 private:
  void publish(PropagatorSet next) {
    history_.push_back(std::make_unique<const PropagatorSet>(std::move(next)));
    current_.store(history_.back().get(), std::memory_order_release);
  }

  std::mutex mutex_;
  std::uint64_t last_id_ = 0;
  std::vector<std::unique_ptr<const PropagatorSet>> history_{[] {
    std::vector<std::unique_ptr<const PropagatorSet>> initial;
    initial.push_back(std::make_unique<const PropagatorSet>());
    return initial;
  }()};
  std::atomic<const PropagatorSet*> current_{history_.front().get()};
};

// Never destroyed: coroutines may suspend and resume during static destruction.
PropagatorRegistry& registry() {
  static auto* instance = new PropagatorRegistry;
  return *instance;
}

}  // namespace
}  // namespace detail

ContextPropagatorRegistration register_context_propagator(ContextPropagator propagator) {
  return ContextPropagatorRegistration(detail::registry().add(std::move(propagator)));
}

ContextPropagatorRegistration::ContextPropagatorRegistration(ContextPropagatorRegistration&& other) noexcept
    : id_(std::exchange(other.id_, 0)) {}

ContextPropagatorRegistration& ContextPropagatorRegistration::operator=(
    ContextPropagatorRegistration&& other) noexcept {
  if (this != &other) {
    if (id_ != 0) detail::registry().remove(id_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

ContextPropagatorRegistration::~ContextPropagatorRegistration() {
  if (id_ != 0) detail::registry().remove(id_);
}

ThreadContextSnapshot ThreadContextSnapshot::capture() {
  ThreadContextSnapshot snapshot;
  const detail::PropagatorSet* set = detail::registry().current();
  if (set->entries.empty()) return snapshot;  // the common case costs one atomic load
  snapshot.propagators_ = set;
  snapshot.states_.reserve(set->entries.size());
  for (const auto& entry : set->entries) snapshot.states_.push_back(entry.propagator->capture());
  return snapshot;
}

void ThreadContextSnapshot::restore() {
  if (states_.empty()) return;
  for (std::size_t i = 0; i < states_.size(); ++i) propagators_->entries[i].propagator->restore(states_[i]);
  states_.clear();
}

}  // namespace aotpipe
