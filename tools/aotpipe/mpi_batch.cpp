#include "aotpipe/mpi_batch.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

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
constexpr int kProgressTag = 1;  // payload: 'S' or 'F', then the graph's name
constexpr int kManifestTag = 2;  // payload: the manifest JSON

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("MPI: {} failed ({})", what, rc));
}
}  // namespace

bool built_with_mpi() { return true; }

MpiSession::MpiSession() {
  // Progress is sent from the batch's progress callback, on a pool thread, while the main thread
  // waits for the batch: calls are serialized, never concurrent.
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_SERIALIZED)
    throw std::runtime_error("MPI: this MPI library does not support MPI_THREAD_SERIALIZED");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  manifests_.resize(static_cast<std::size_t>(size_));
}

MpiSession::~MpiSession() { MPI_Finalize(); }

void MpiSession::send_progress(bool ok, const std::string& name) const {
  const std::string payload = (ok ? "S" : "F") + name;
  check(MPI_Send(payload.data(), static_cast<int>(payload.size()), MPI_CHAR, 0, kProgressTag, MPI_COMM_WORLD),
        "MPI_Send (progress)");
}

void MpiSession::send_manifest(const std::string& json) const {
  check(MPI_Send(json.data(), static_cast<int>(json.size()), MPI_CHAR, 0, kManifestTag, MPI_COMM_WORLD),
        "MPI_Send (manifest)");
}

bool MpiSession::handle_one(const ProgressHandler& on_progress, bool wait) {
  MPI_Status status;
  int ready = 0;
  if (wait) {
    check(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status), "MPI_Probe");
    ready = 1;
  } else {
    check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &ready, &status), "MPI_Iprobe");
  }
  if (!ready) return false;
  int count = 0;
  check(MPI_Get_count(&status, MPI_CHAR, &count), "MPI_Get_count");
  std::string payload(static_cast<std::size_t>(count), '\0');
  check(MPI_Recv(payload.data(), count, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "MPI_Recv");
  if (status.MPI_TAG == kProgressTag) {
    if (on_progress && !payload.empty()) on_progress(status.MPI_SOURCE, payload[0] == 'S', payload.substr(1));
  } else {
    manifests_[static_cast<std::size_t>(status.MPI_SOURCE)] = std::move(payload);
    ++manifests_received_;
  }
  return true;
}

void MpiSession::poll(const ProgressHandler& on_progress) {
  while (handle_one(on_progress, /*wait=*/false)) {
  }
}

std::vector<std::string> MpiSession::receive_manifests(const ProgressHandler& on_progress) {
  while (manifests_received_ < size_ - 1) handle_one(on_progress, /*wait=*/true);
  return manifests_;
}

#else  // built without MPI

bool built_with_mpi() { return false; }
MpiSession::MpiSession() {
  throw std::runtime_error(
      "started by mpirun, but this aotpipe was built without MPI (AOTPIPE_WITH_MPI=OFF or no MPI found); every rank "
      "would compile the whole batch");
}
MpiSession::~MpiSession() = default;
void MpiSession::send_progress(bool, const std::string&) const {}
void MpiSession::send_manifest(const std::string&) const {}
bool MpiSession::handle_one(const ProgressHandler&, bool) { return false; }
void MpiSession::poll(const ProgressHandler&) {}
std::vector<std::string> MpiSession::receive_manifests(const ProgressHandler&) { return {}; }

#endif

}  // namespace aotpipe::cli
