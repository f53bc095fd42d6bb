#include "aotpipe/mpi_batch.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#ifdef AOTPIPE_HAVE_MPI
#include <mpi.h>
#endif

namespace aotpipe::cli {

bool launched_by_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var); v && std::atoi(v) > 1) return true;
  return false;
}

#ifdef AOTPIPE_HAVE_MPI

namespace {
constexpr int kProgressTag = 1;  // to rank 0: 'S' or 'F', then the graph's name
constexpr int kManifestTag = 2;  // to rank 0: the manifest JSON
constexpr int kRequestTag = 3;   // to rank 0: one uint64, the smallest chunk wanted
constexpr int kChunkTag = 4;     // from rank 0: uint64 batch indices; none: the batch is handed out

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("MPI: {} failed ({})", what, rc));
}

// The probed message, into a Buffer of `type` elements (std::string of MPI_CHAR, a vector of
// MPI_UINT64_T).
template <typename Buffer>
Buffer receive(const MPI_Status& status, MPI_Datatype type) {
  int count = 0;
  check(MPI_Get_count(&status, type, &count), "MPI_Get_count");
  Buffer buffer(static_cast<std::size_t>(count), typename Buffer::value_type{});
  check(MPI_Recv(buffer.data(), count, type, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "MPI_Recv");
  return buffer;
}
std::string receive_text(const MPI_Status& status) { return receive<std::string>(status, MPI_CHAR); }
std::vector<std::uint64_t> receive_indices(const MPI_Status& status) {
  return receive<std::vector<std::uint64_t>>(status, MPI_UINT64_T);
}

void send_text(const std::string& payload, int tag, const char* what) {
  check(MPI_Send(payload.data(), static_cast<int>(payload.size()), MPI_CHAR, 0, tag, MPI_COMM_WORLD), what);
}
}  // namespace

bool built_with_mpi() { return true; }

MpiSession::MpiSession() {
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_SERIALIZED)
    throw std::runtime_error("MPI: this MPI library does not support MPI_THREAD_SERIALIZED");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

MpiSession::~MpiSession() { MPI_Finalize(); }

std::vector<std::size_t> MpiSession::request_chunk(std::size_t at_least) {
  std::lock_guard lock(mutex_);
  const std::uint64_t wanted = at_least;
  check(MPI_Send(&wanted, 1, MPI_UINT64_T, 0, kRequestTag, MPI_COMM_WORLD), "MPI_Send (chunk request)");
  MPI_Status status;
  check(MPI_Probe(0, kChunkTag, MPI_COMM_WORLD, &status), "MPI_Probe (chunk)");
  const std::vector<std::uint64_t> indices = receive_indices(status);
  return {indices.begin(), indices.end()};
}

void MpiSession::send_progress(bool ok, const std::string& name) {
  std::lock_guard lock(mutex_);
  send_text((ok ? "S" : "F") + name, kProgressTag, "MPI_Send (progress)");
}

void MpiSession::send_manifest(const std::string& json) {
  std::lock_guard lock(mutex_);
  send_text(json, kManifestTag, "MPI_Send (manifest)");
}

std::vector<std::string> MpiSession::serve(ChunkDispenser& chunks, const ProgressHandler& on_progress) {
  std::vector<std::string> manifests(static_cast<std::size_t>(size_));
  int received = 0;
  while (received < size_ - 1) {
    MPI_Status status;
    int ready = 0;
    check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &ready, &status), "MPI_Iprobe");
    if (!ready) {
      // A blocking probe would spin a core (Open MPI busy-polls); requests are rare, so poll.
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      continue;
    }
    switch (status.MPI_TAG) {
      case kRequestTag: {
        const std::vector<std::uint64_t> wanted = receive_indices(status);
        const std::vector<std::size_t> chunk = chunks.next(wanted.empty() ? 1 : wanted.front());
        const std::vector<std::uint64_t> payload(chunk.begin(), chunk.end());
        check(MPI_Send(payload.data(), static_cast<int>(payload.size()), MPI_UINT64_T, status.MPI_SOURCE, kChunkTag,
                       MPI_COMM_WORLD),
              "MPI_Send (chunk)");
        break;
      }
      case kProgressTag: {
        const std::string payload = receive_text(status);
        if (on_progress && !payload.empty()) on_progress(status.MPI_SOURCE, payload[0] == 'S', payload.substr(1));
        break;
      }
      case kManifestTag:
        manifests[static_cast<std::size_t>(status.MPI_SOURCE)] = receive_text(status);
        ++received;
        break;
      default: receive_text(status);  // not ours: drop it
    }
  }
  return manifests;
}

#else  // built without MPI

bool built_with_mpi() { return false; }
MpiSession::MpiSession() {
  throw std::runtime_error(
      "started by mpirun, but this aotpipe was built without MPI (AOTPIPE_WITH_MPI=OFF or no MPI found); every rank "
      "would compile the whole batch");
}
MpiSession::~MpiSession() = default;
std::vector<std::size_t> MpiSession::request_chunk(std::size_t) { return {}; }
void MpiSession::send_progress(bool, const std::string&) {}
void MpiSession::send_manifest(const std::string&) {}
std::vector<std::string> MpiSession::serve(ChunkDispenser&, const ProgressHandler&) { return {}; }

#endif

}  // namespace aotpipe::cli
