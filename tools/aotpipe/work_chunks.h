#pragma once
// Handing a batch's graph files out in chunks, on demand: under mpirun rank 0 answers each rank's
// request for work with the next chunk, so a rank that drew cheap graphs asks again and none waits
// on another's long tail. Files go largest first (their size estimates their cost) and chunks
// shrink as the batch drains (guided self-scheduling: about remaining / (2 x workers), never fewer
// than the asker's minimum), so the last chunks are small and the ranks finish together. Chunks,
// not single graphs: a graph compiles in milliseconds, a request is a round trip.
#include "aotpipe/graph_files.h"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace aotpipe::cli {

// The estimated cost of each file: its size in bytes (0 when it cannot be read).
std::vector<std::uintmax_t> estimated_costs(const std::vector<GraphFile>& files);

// The files' indices, most costly first; ties broken by path. Depends only on paths and sizes, so
// every rank and task computes the same order.
std::vector<std::size_t> largest_first(const std::vector<GraphFile>& files, const std::vector<std::uintmax_t>& costs);

class ChunkDispenser {
 public:
  // `order`: the batch indices in the order to hand them out; `costs`: each batch index's
  // estimated cost (0 counts as 1); `workers`: the askers (ranks).
  ChunkDispenser(std::vector<std::size_t> order, const std::vector<std::uintmax_t>& costs, std::size_t workers);

  // The next chunk of batch indices: the next ones in order until their cost reaches the remaining
  // cost / (2 x workers), and at least `at_least` of them (fewer only when fewer remain); empty once
  // everything is handed out. Thread-safe.
  std::vector<std::size_t> next(std::size_t at_least);

  std::size_t remaining() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::size_t> order_;
  std::vector<std::uintmax_t> cost_;  // of each entry of order_
  std::uintmax_t remaining_cost_ = 0;
  std::size_t handed_out_ = 0;
  std::size_t workers_;
};

}  // namespace aotpipe::cli
