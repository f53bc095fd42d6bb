#pragma once
// `aotpipe compile` under mpirun (built with AOTPIPE_WITH_MPI): rank 0 hands the batch out in
// chunks on demand (work_chunks.h); every rank, rank 0 included, compiles the chunks it asks for
// on its own pool and reports each finished graph to rank 0, which draws the one progress bar;
// at the end the ranks send their rows and rank 0 prints the one table, summary and failures
// (each with the rank that saw it). Without mpirun the tool behaves exactly as without MPI.
// Open MPI 4.1 aborts the job when a rank dies: the way to recover is to re-run, and the compile
// cache (where every graph is published as it finishes) makes the re-run compile only what is
// missing.
//
// Threads: MPI is initialized MPI_THREAD_SERIALIZED. On rank 0 only the thread in serve() calls
// MPI; on the other ranks every call takes the session's mutex, so the worker lanes and the
// pool threads that report progress may call from any thread.
#include "aotpipe/work_chunks.h"

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace aotpipe::cli {

// True when mpirun started this process among several ranks (OMPI_COMM_WORLD_SIZE, PMI_SIZE).
bool launched_by_mpirun();
// Whether this build has MPI.
bool built_with_mpi();

class MpiSession {
 public:
  // MPI_Init; throws std::runtime_error when this build has no MPI.
  MpiSession();
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Ranks other than 0: asks rank 0 for the next chunk of batch indices (at least `at_least`
  // unless fewer remain); empty when the batch is all handed out.
  std::vector<std::size_t> request_chunk(std::size_t at_least);
  // Ranks other than 0: one graph finished (`ok` or not); `name` labels it on rank 0's bar.
  void send_progress(bool ok, const std::string& name);
  // Ranks other than 0, once, after their last chunk: the rank's manifest (rows as JSON).
  void send_manifest(const std::string& json);

  using ProgressHandler = std::function<void(int rank, bool ok, const std::string& name)>;
  // Rank 0, on a thread of its own: answers the other ranks' chunk requests from `chunks` and
  // hands their progress to `on_progress` (called on this thread) until every other rank has sent
  // its manifest; returns the manifests by rank (index 0 empty). Polls, and sleeps briefly when
  // nothing has arrived, so it does not take a core from the compiles.
  std::vector<std::string> serve(ChunkDispenser& chunks, const ProgressHandler& on_progress);

 private:
  int rank_ = 0;
  int size_ = 1;
  std::mutex mutex_;  // serializes MPI calls on ranks other than 0
};

}  // namespace aotpipe::cli
