#pragma once
// Lazy<T>: a value made by a function on first use, once, shared by every copy of the Lazy (a
// cache hit's graphs are decoded, and its graphs backend-compiled, only when something needs
// them: PyTorch's lazy backward compile and _LazyGraphModule).
//
// Thread-safe: concurrent first uses make the value once; the others wait for it. A `make` that
// throws leaves the Lazy unmade, and the next use tries again (and usually throws the same).
// std::call_once is not used: libstdc++'s is not exception-safe on every target.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

namespace aotpipe {

template <typename T>
class Lazy {
 public:
  Lazy() = default;  // empty: get() throws std::logic_error
  static Lazy made(T value) {
    Lazy lazy;
    lazy.cell_ = std::make_shared<Cell>();
    lazy.cell_->value.emplace(std::move(value));
    lazy.cell_->ready.store(true, std::memory_order_release);
    return lazy;
  }
  static Lazy deferred(std::function<T()> make) {
    Lazy lazy;
    lazy.cell_ = std::make_shared<Cell>();
    lazy.cell_->make = std::move(make);
    return lazy;
  }

  bool empty() const noexcept { return cell_ == nullptr; }
  // Whether the value exists yet (a test's and a report's question; never makes it).
  bool is_made() const noexcept { return cell_ && cell_->ready.load(std::memory_order_acquire); }

  const T& get() const {
    if (!cell_) throw std::logic_error("aotpipe: an empty Lazy was used");
    Cell& cell = *cell_;
    if (cell.ready.load(std::memory_order_acquire)) return *cell.value;
    std::lock_guard lock(cell.mutex);
    if (!cell.value) {
      cell.value.emplace(cell.make());
      cell.make = nullptr;  // what it captured is not needed any more
      cell.ready.store(true, std::memory_order_release);
    }
    return *cell.value;
  }

 private:
  struct Cell {
    std::mutex mutex;
    std::atomic<bool> ready{false};
    std::function<T()> make;
    std::optional<T> value;
  };
  std::shared_ptr<Cell> cell_;
};

}  // namespace aotpipe
