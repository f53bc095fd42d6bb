#pragma once
// Structural and type checks of a Graph, run between stages in debug builds (like XLA's
// invariant checker). Each problem is reported with its kind, the node and a message.
#include <aotpipe/graph/graph.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace aotpipe {

enum class VerifyErrorKind {
  UseBeforeDefinition,  // a node reads a value defined later in the graph
  ForeignValue,         // a node or the output list reads a value of another graph
  ArgumentCount,        // a call's argument count differs from its schema
  ArgumentType,         // an argument does not fit its schema type
  OutputCount,          // a call defines a different number of values than the schema returns
  OutputType,           // a defined value's type differs from the schema's return type
  MissingTensorMeta,    // a tensor input or read tensor value without TensorMeta (when required)
  DanglingOutput,       // a graph output that no input or node of this graph defines
  UnusedValue,          // a side-effect-free node none of whose values is used (when required)
  UnboundConstant,      // a constant node whose key has no tensor bound (when required)
};
std::string_view to_string(VerifyErrorKind kind);

struct VerifyIssue {
  VerifyErrorKind kind;
  std::string message;  // names the graph, the node's value and op, the argument
};

struct VerifyOptions {
  bool require_tensor_meta = true;
  bool allow_dead_code = false;
  bool require_bound_constants = false;
};

class VerifyError : public std::runtime_error {
 public:
  explicit VerifyError(std::vector<VerifyIssue> issues);
  const std::vector<VerifyIssue>& issues() const { return issues_; }

 private:
  std::vector<VerifyIssue> issues_;
};

// Every problem found (empty: the graph is well formed).
std::vector<VerifyIssue> verify_issues(const Graph& graph, const VerifyOptions& options = {});
// Throws VerifyError listing every problem.
void verify(const Graph& graph, const VerifyOptions& options = {});

}  // namespace aotpipe
