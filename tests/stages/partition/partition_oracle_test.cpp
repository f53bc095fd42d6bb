// Saved bytes of aotpipe's partitioners against PyTorch's own (partition_oracle.py runs
// torch._functorch.partitioners on the same functions through aot_function) and the op lists
// against get_default_op_list(). The oracle is found through $AOTPIPE_PYTHON and
// $AOTPIPE_TEST_DIR, else through the paths CMake compiled in; without a Python the test fails.
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>
#include <aotpipe/stages/partition/op_classes.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "partition_cases.h"

namespace aotpipe {
namespace {

using nlohmann::json;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// Runs the oracle; fails the test (returns null) when Python or torch is missing.
json run_oracle() {
  const std::string python = env_or("AOTPIPE_PYTHON", AOTPIPE_PARTITION_DEFAULT_PYTHON);
  // $AOTPIPE_TEST_DIR is tests/stages or this folder, depending on who sets it.
  std::string script = AOTPIPE_PARTITION_ORACLE_PY;
  if (const char* dir = std::getenv("AOTPIPE_TEST_DIR"); dir && *dir) {
    for (const char* rel : {"/partition_oracle.py", "/partition/partition_oracle.py"}) {
      std::string candidate = std::string(dir) + rel;
      if (std::ifstream(candidate).good()) {
        script = candidate;
        break;
      }
    }
  }
  if (python.empty()) {
    ADD_FAILURE() << "no Python to run the PyTorch oracle: set AOTPIPE_PYTHON (a python with torch 2.11)";
    return nullptr;
  }
  const std::string cmd = fmt::format("'{}' '{}' 2>&1", python, script);
  std::string out;
  if (FILE* pipe = popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    int status = pclose(pipe);
    if (status != 0) {
      ADD_FAILURE() << "the oracle failed (" << cmd << "), status " << status << ":\n" << out;
      return nullptr;
    }
  } else {
    ADD_FAILURE() << "cannot run " << cmd;
    return nullptr;
  }
  // Python may print warnings before the JSON object.
  auto start = out.find("\n{");
  std::string text = out.rfind("{", 0) == 0 ? out : start == std::string::npos ? out : out.substr(start + 1);
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the oracle's output is not JSON (" << e.what() << "):\n" << out;
    return nullptr;
  }
}

// What kind of value each saved name is: "input", "getitem" (a result of a multi-output op) or
// the op ("aten::mean.dim"), as partition_oracle.py's op_name() names them.
std::vector<std::string> saved_ops(const Graph& joint, const std::vector<std::string>& names) {
  std::vector<std::string> ops;
  for (const auto& name : names) {
    Value* v = joint.find_value(name);
    if (!v || v->is_input()) {
      ops.push_back("input");
      continue;
    }
    const Node* n = v->producer();
    const auto& returns = n->schema().returns();
    bool tuple = returns.size() != 1 || returns[0].type()->kind() == c10::TypeKind::ListType;
    ops.push_back(tuple ? "getitem" : n->qualified_name());
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

std::vector<std::string> sorted(json j) {
  auto v = j.get<std::vector<std::string>>();
  std::sort(v.begin(), v.end());
  return v;
}

std::string abbreviated(const std::vector<std::string>& names) {
  if (names.size() <= 12) return fmt::format("{}", fmt::join(names, " "));
  std::vector<std::string> head(names.begin(), names.begin() + 10);
  return fmt::format("{} ... ({} values)", fmt::join(head, " "), names.size());
}

std::set<std::string> aten_only(const partitioners::PacketSet& s) {
  std::set<std::string> out;
  for (const auto& x : s)
    if (x.rfind("aten::", 0) == 0) out.insert(x);
  return out;
}

TEST(PartitionOracle, SavedBytesMatchPyTorch) {
  json oracle = run_oracle();
  ASSERT_FALSE(oracle.is_null());

  // The op classes are PyTorch's (aten entries of get_default_op_list()).
  const json& lists = oracle.at("_op_lists");
  const auto& ops = partitioners::default_op_types();
  EXPECT_EQ(aten_only(ops.recomputable), lists.at("recomputable").get<std::set<std::string>>());
  EXPECT_EQ(aten_only(ops.view), lists.at("view").get<std::set<std::string>>());
  EXPECT_EQ(aten_only(ops.random), lists.at("random").get<std::set<std::string>>());
  EXPECT_EQ(aten_only(ops.compute_intensive), lists.at("compute_intensive").get<std::set<std::string>>());

  std::string table =
      fmt::format("{:<15} | {:>12} {:>12} {:>12} | {:>12} {:>12} {:>12} | saved by aotpipe min-cut\n", "function",
                  "C++ min-cut", "Py min-cut", "Py raw", "C++ default", "Py default", "Py raw");
  for (const auto& c : testing::partition_cases()) {
    SCOPED_TRACE(c.name);
    if (!c.no_oracle_reason.empty()) {
      // No PyTorch counterpart (the reason is in partition_cases.cpp); PartitionNumerics covers it.
      EXPECT_FALSE(oracle.contains(c.name));
      table += fmt::format("{:<15} | not compared: {}\n", c.name, c.no_oracle_reason);
      continue;
    }
    ASSERT_TRUE(oracle.contains(c.name)) << "partition_oracle.py lacks " << c.name;
    const json& same = oracle.at(c.name).at("same_ops");
    const json& raw = oracle.at(c.name).at("raw");
    TensorList inputs = c.inputs();
    TraceResult t = trace_joint(c.fn, inputs, {.functionalize = true});
    JointGraph joint{t.graph, inputs.size(), t.num_user_outputs};
    PartitionResult m = partitioners::min_cut_rematerialization_partition()(joint);
    PartitionResult d = partitioners::default_partition()(joint);
    table += fmt::format("{:<15} | {:>12} {:>12} {:>12} | {:>12} {:>12} {:>12} | {}\n", c.name, m.saved_bytes,
                         same.at("min_cut_saved_bytes").get<int64_t>(), raw.at("min_cut_saved_bytes").get<int64_t>(),
                         d.saved_bytes, same.at("default_saved_bytes").get<int64_t>(),
                         raw.at("default_saved_bytes").get<int64_t>(), abbreviated(m.saved_values));

    // Every function here traces to the same ATen ops in C++ and in Python once Python's
    // `detach` nodes are folded ("same_ops", see partition_oracle.py): equal bytes, and saved
    // values of the same kinds.
    EXPECT_EQ(m.saved_bytes, same.at("min_cut_saved_bytes").get<int64_t>());
    EXPECT_EQ(d.saved_bytes, same.at("default_saved_bytes").get<int64_t>());
    EXPECT_EQ(saved_ops(joint.graph, m.saved_values), sorted(same.at("min_cut_saved_ops")));
    EXPECT_EQ(saved_ops(joint.graph, d.saved_values), sorted(same.at("default_saved_ops")));
    // On Python's raw joint graph the saved values include `detach` nodes: where autograd saved
    // an op's output the backward reads detach(x), so min-cut saves detach(x) in place of x, and
    // default_partition saves the forward's detach(x) as well as x when the backward reads both
    // (mlp: relu and detach; layer_norm_ish: sqrt and detach), counting those bytes twice. With
    // each detach resolved to the value it detaches (counted once), the bytes are aotpipe's.
    EXPECT_EQ(m.saved_bytes, raw.at("min_cut_saved_bytes_detach_resolved").get<int64_t>());
    EXPECT_EQ(d.saved_bytes, raw.at("default_saved_bytes_detach_resolved").get<int64_t>());
  }
  std::cout << "Saved bytes, aotpipe (C++) vs torch " << oracle.at("_torch_version").get<std::string>()
            << " (Py: detach folded, Py raw: aot_function's joint as is):\n"
            << table;
}

}  // namespace
}  // namespace aotpipe
