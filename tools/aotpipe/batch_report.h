#pragma once
// The report of a batch compile: one row per graph file, the table, the summary and the failures
// `aotpipe compile` prints, and rows as JSON, so `aotpipe gather` prints the same report for a
// batch compiled in shards.
#include "aotpipe/compile_report.h"

#include <aotpipe/graph/checked_json.h>
#include <aotpipe/tracer/tracer.h>

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe::cli {

// One row of the report: a graph file, compiled or not.
struct GraphRow {
  std::string file;
  std::string name;  // the graph's, or the file's stem when it could not be read
  std::optional<GraphSummary> summary;
  std::map<std::string, double> stage_ms;  // top-level stages
  CpuFallbackCounts cpu_fallbacks;         // ops its fake traces ran on the CPU kernel
  std::vector<std::string> backend_notes;  // what the backend compilers said (CompiledGraphs::notes)
  double total_ms = 0;
  std::string failed_stage;  // empty: ok
  std::string message;
  std::string cache;         // the compile cache's outcome: hit, miss, bypassed, off; empty: not compiled
  bool from_record = false;  // a hit found by the file's record (file_records.h), the file not read
  std::string origin;        // who compiled it, in a batch of shards or MPI ranks ("rank 2 on node7"); may be empty
  bool ok() const { return failed_stage.empty(); }
};

// One line per graph: ops, forward/backward ops, ms per stage of `stages`, total, CPU-fallback
// calls, saved bytes under both partitioners, ok or FAILED <stage>.
void print_table(const std::vector<GraphRow>& rows, const std::vector<std::string>& stages);
// Graphs, ok, failed, wall time, graphs/s and saved bytes; `workers` says who compiled them
// ("2 worker threads"); the CPU fallbacks; the backends' notes; then every failure in full.
void print_summary(const std::vector<GraphRow>& rows, double wall_seconds, const std::string& workers);

nlohmann::json to_json(const GraphRow& row);
// Throws nlohmann::json::exception on a malformed row.
GraphRow graph_row_from_json(const CheckedJson& json);

}  // namespace aotpipe::cli
