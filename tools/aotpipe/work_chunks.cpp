#include "aotpipe/work_chunks.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <system_error>

namespace aotpipe::cli {

std::vector<std::uintmax_t> estimated_costs(const std::vector<GraphFile>& files) {
  std::vector<std::uintmax_t> costs(files.size(), 0);
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(files[i].path, ec);
    costs[i] = ec ? 0 : size;
  }
  return costs;
}

std::vector<std::size_t> largest_first(const std::vector<GraphFile>& files, const std::vector<std::uintmax_t>& costs) {
  std::vector<std::size_t> order(files.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (costs[a] != costs[b]) return costs[a] > costs[b];
    return files[a].path < files[b].path;
  });
  return order;
}

ChunkDispenser::ChunkDispenser(std::vector<std::size_t> order, const std::vector<std::uintmax_t>& costs,
                               std::size_t workers)
    : order_(std::move(order)), workers_(std::max<std::size_t>(workers, 1)) {
  cost_.reserve(order_.size());
  for (std::size_t index : order_) {
    cost_.push_back(std::max<std::uintmax_t>(index < costs.size() ? costs[index] : 0, 1));
    remaining_cost_ += cost_.back();
  }
}

std::vector<std::size_t> ChunkDispenser::next(std::size_t at_least) {
  std::lock_guard lock(mutex_);
  const std::uintmax_t target = (remaining_cost_ + 2 * workers_ - 1) / (2 * workers_);
  std::vector<std::size_t> chunk;
  std::uintmax_t cost = 0;
  while (handed_out_ < order_.size() && (cost < target || chunk.size() < at_least)) {
    chunk.push_back(order_[handed_out_]);
    cost += cost_[handed_out_];
    ++handed_out_;
  }
  remaining_cost_ -= cost;
  return chunk;
}

std::size_t ChunkDispenser::remaining() const {
  std::lock_guard lock(mutex_);
  return order_.size() - handed_out_;
}

}  // namespace aotpipe::cli
