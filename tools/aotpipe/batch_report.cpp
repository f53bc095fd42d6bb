#include "aotpipe/batch_report.h"
#include "aotpipe/load_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace aotpipe::cli {

namespace {

std::string fmt_ms(double ms) { return ms >= 100 ? fmt::format("{:.0f}", ms) : fmt::format("{:.2f}", ms); }
std::string fmt_bytes(const std::optional<PartitionNumbers>& n) { return n ? std::to_string(n->saved_bytes) : "-"; }

}  // namespace

void print_table(const std::vector<GraphRow>& rows, const std::vector<std::string>& stages) {
  std::size_t name_width = 5;
  for (const GraphRow& r : rows) name_width = std::max(name_width, r.name.size());
  fmt::print("{:<{}} {:>6} {:>5} {:>5}", "graph", name_width, "ops", "fw", "bw");
  for (const std::string& s : stages) fmt::print(" {:>{}}", s, std::max<std::size_t>(s.size(), 7));
  fmt::print(" {:>9} {:>8} {:>8} {:>14} {:>14}  {}\n", "total ms", "fallback", "cache", "saved default",
             "saved min_cut", "result");
  for (const GraphRow& r : rows) {
    const GraphSummary* s = r.summary ? &*r.summary : nullptr;
    fmt::print("{:<{}} {:>6} {:>5} {:>5}", r.name, name_width, s ? std::to_string(s->ops) : "-",
               s ? std::to_string(s->forward_ops) : "-", s && s->training ? std::to_string(s->backward_ops) : "-");
    for (const std::string& stage : stages) {
      auto it = r.stage_ms.find(stage);
      fmt::print(" {:>{}}", it == r.stage_ms.end() ? "-" : fmt_ms(it->second), std::max<std::size_t>(stage.size(), 7));
    }
    fmt::print(" {:>9} {:>8} {:>8} {:>14} {:>14}  {}\n", r.total_ms > 0 ? fmt_ms(r.total_ms) : "-",
               s ? std::to_string(total_cpu_fallback_calls(r.cpu_fallbacks)) : "-", r.cache.empty() ? "-" : r.cache,
               s ? fmt_bytes(s->default_partition) : "-", s ? fmt_bytes(s->min_cut) : "-",
               r.ok() ? "ok" : fmt::format("FAILED {}", r.failed_stage));
  }
}

namespace {

// Which ops ran their CPU kernel on zero-filled tensors instead of a Meta kernel, in how many
// graphs: a compile of the others was truly fake.
void print_cpu_fallbacks(const std::vector<GraphRow>& rows) {
  CpuFallbackCounts total;
  std::map<std::string, std::size_t> graphs_per_op;
  std::size_t graphs = 0;
  for (const GraphRow& r : rows) {
    merge_cpu_fallbacks(total, r.cpu_fallbacks);
    for (const auto& [op, calls] : r.cpu_fallbacks) ++graphs_per_op[op];
    graphs += r.cpu_fallbacks.empty() ? 0 : 1;
  }
  if (total.empty()) {
    fmt::print("  CPU fallback: none (every trace ran on Meta kernels only)\n");
    return;
  }
  auto count = [](std::size_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); };
  fmt::print("  CPU fallback: {} in {} (ops without a Meta kernel ran on zero-filled CPU tensors):\n",
             count(total_cpu_fallback_calls(total), "call"), count(graphs, "graph"));
  for (const auto& [op, calls] : total)
    fmt::print("    {:<48} {:>10} in {}\n", op, count(calls, "call"), count(graphs_per_op[op], "graph"));
}

// What the backend compilers said about the graphs (a graph not captured into a CUDA graph, and
// why); nothing when they said nothing.
void print_backend_notes(const std::vector<GraphRow>& rows) {
  bool header = false;
  for (const GraphRow& r : rows) {
    for (const std::string& note : r.backend_notes) {
      if (!std::exchange(header, true)) fmt::print("  backend notes:\n");
      fmt::print("    {}: {}\n", r.name, note);
    }
  }
}

// How many graphs the compile cache served.
void print_cache_outcomes(const std::vector<GraphRow>& rows) {
  std::map<std::string, std::size_t> counts;
  for (const GraphRow& r : rows)
    if (!r.cache.empty()) ++counts[r.cache];
  if (counts.empty() || (counts.size() == 1 && counts.count("off"))) {
    fmt::print("  compile cache: off\n");
    return;
  }
  const auto by_record = std::count_if(rows.begin(), rows.end(), [](const GraphRow& r) { return r.from_record; });
  fmt::print("  compile cache: {} hits, {} misses, {} bypassed", counts["hit"], counts["miss"], counts["bypassed"]);
  if (by_record) fmt::print(" ({} of the hits found by their file's record, the file not parsed)", by_record);
  fmt::print("\n");
}

}  // namespace

void print_summary(const std::vector<GraphRow>& rows, double wall_seconds, const std::string& workers) {
  std::size_t failed = 0, compiled = 0;
  int64_t saved_default = 0, saved_min_cut = 0;
  for (const GraphRow& r : rows) {
    failed += r.ok() ? 0 : 1;
    if (r.summary) ++compiled;
    if (r.summary && r.summary->default_partition) {
      saved_default += r.summary->default_partition->saved_bytes;
      saved_min_cut += r.summary->min_cut->saved_bytes;
    }
  }
  fmt::print("\nSummary\n");
  fmt::print("  {:>8}  {:>8}  {:>8}  {:>10}  {:>10}  {:>14}  {:>14}\n", "graphs", "ok", "failed", "wall s", "graphs/s",
             "saved default", "saved min_cut");
  fmt::print("  {:>8}  {:>8}  {:>8}  {:>10.4f}  {:>10.1f}  {:>14}  {:>14}\n", rows.size(), rows.size() - failed, failed,
             wall_seconds, wall_seconds > 0 ? static_cast<double>(compiled) / wall_seconds : 0.0, saved_default,
             saved_min_cut);
  fmt::print("  ({})\n", workers);
  print_cache_outcomes(rows);
  print_cpu_fallbacks(rows);
  print_backend_notes(rows);
  if (!failed) return;
  fmt::print("\nFailures\n");
  for (const GraphRow& r : rows) {
    if (r.ok()) continue;
    fmt::print("  {} ({}){}: {}:\n", r.file, r.name, r.origin.empty() ? "" : " [" + r.origin + "]", r.failed_stage);
    print_message_lines(r.message, "    ");
  }
}

// ---- rows as JSON (the shard manifests of `aotpipe compile --shard`) ------------------------

namespace {

nlohmann::json to_json(const std::optional<PartitionNumbers>& n) {
  if (!n) return nullptr;
  return {{"saved", n->saved}, {"saved_bytes", n->saved_bytes}, {"recomputed", n->recomputed}};
}

std::optional<PartitionNumbers> partition_numbers_from_json(const CheckedJson& j) {
  if (j.is_null()) return std::nullopt;
  return PartitionNumbers{j.at("saved").get<std::size_t>(), j.at("saved_bytes").get<int64_t>(),
                          j.at("recomputed").get<std::size_t>()};
}

}  // namespace

nlohmann::json to_json(const GraphRow& row) {
  nlohmann::json j = {{"file", row.file},
                      {"name", row.name},
                      {"stage_ms", row.stage_ms},
                      {"cpu_fallbacks", row.cpu_fallbacks},
                      {"backend_notes", row.backend_notes},
                      {"total_ms", row.total_ms},
                      {"failed_stage", row.failed_stage},
                      {"message", row.message},
                      {"origin", row.origin},
                      {"cache", row.cache},
                      {"from_record", row.from_record},
                      {"summary", nullptr}};
  if (row.summary) {
    const GraphSummary& s = *row.summary;
    j["summary"] = {{"training", s.training},
                    {"ops", s.ops},
                    {"forward_ops", s.forward_ops},
                    {"backward_ops", s.backward_ops},
                    {"default_partition", to_json(s.default_partition)},
                    {"min_cut", to_json(s.min_cut)}};
  }
  return j;
}

GraphRow graph_row_from_json(const CheckedJson& j) {
  GraphRow row;
  row.file = j.at("file").get<std::string>();
  row.name = j.at("name").get<std::string>();
  row.stage_ms = j.at("stage_ms").get<std::map<std::string, double>>();
  row.cpu_fallbacks = j.at("cpu_fallbacks").get<CpuFallbackCounts>();
  row.backend_notes = j.value("backend_notes", std::vector<std::string>{});
  row.total_ms = j.at("total_ms").get<double>();
  row.failed_stage = j.at("failed_stage").get<std::string>();
  row.message = j.at("message").get<std::string>();
  row.origin = j.value("origin", std::string());
  row.cache = j.value("cache", std::string());
  row.from_record = j.value("from_record", false);
  if (const CheckedJson& s = j.at("summary"); !s.is_null()) {
    GraphSummary summary;
    summary.training = s.at("training").get<bool>();
    summary.ops = s.at("ops").get<std::size_t>();
    summary.forward_ops = s.at("forward_ops").get<std::size_t>();
    summary.backward_ops = s.at("backward_ops").get<std::size_t>();
    summary.default_partition = partition_numbers_from_json(s.at("default_partition"));
    summary.min_cut = partition_numbers_from_json(s.at("min_cut"));
    row.summary = summary;
  }
  return row;
}

}  // namespace aotpipe::cli
