#pragma once
// `aotpipe compile` under mpirun (built with AOTPIPE_WITH_MPI): every rank compiles its shard of
// the batch (the --shard assignment with K = rank, N = ranks) on its own pool; the ranks report
// each finished graph to rank 0, which draws the one progress bar, then send their rows; rank 0
// prints the one table, summary and failures (each with the rank that saw it). Without mpirun
// the tool behaves exactly as without MPI. Open MPI 4.1 aborts the job when a rank dies: the
// way to recover is to re-run (with --shard, only the missing shards).
#include <functional>
#include <memory>
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

  // Ranks other than 0: one graph finished (`ok` or not); `name` labels it on rank 0's bar.
  void send_progress(bool ok, const std::string& name) const;
  // Ranks other than 0, once: the rank's manifest (rows as JSON).
  void send_manifest(const std::string& json) const;

  using ProgressHandler = std::function<void(int rank, bool ok, const std::string& name)>;
  // Rank 0: handles the progress messages that have arrived, without waiting.
  void poll(const ProgressHandler& on_progress);
  // Rank 0: waits for every other rank's manifest, handling progress meanwhile; returns them by
  // rank (index 0 empty).
  std::vector<std::string> receive_manifests(const ProgressHandler& on_progress);

 private:
  bool handle_one(const ProgressHandler& on_progress, bool wait);
  int rank_ = 0;
  int size_ = 1;
  std::vector<std::string> manifests_;
  int manifests_received_ = 0;
};

}  // namespace aotpipe::cli
