#pragma once
// Shared by the .pt2 tests: the example archives of examples/pt2/, what eager PyTorch computed for
// them (<name>.expected.pt, written by examples/pt2/export_models.py), and a way to write a
// modified copy of an archive (for the bad-input tests).
#include <aotpipe/graph/named_tensor.h>

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace aotpipe::testing {

std::filesystem::path pt2_dir();  // examples/pt2 of the source tree
// tests/export/data_dependent of the source tree: programs with data-dependent sizes, which run
// as exported but do not compile (so they are not among the examples a batch compiles).
std::filesystem::path data_dependent_dir();

// One training (or inference) step of the original nn.Module, as export_models.py recorded it.
struct EagerStep {
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> grad_outputs;       // empty for inference
  std::map<std::string, at::Tensor> grads;    // parameter FQN -> .grad
  std::map<std::string, at::Tensor> buffers;  // buffer FQN -> value after the step
  bool training = false;
};
EagerStep load_eager_step(const std::string& model, const std::filesystem::path& dir = pt2_dir());

// `actual` equals `expected` to fp32's error (rtol 1e-4, atol 1e-5); a gtest failure naming `what`.
void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what);
// Runs one step of `call` (a program eager, compiled or packaged) as export_models.py ran the
// module (under no_grad for an inference step; backward with its grad_outputs), and checks the
// outputs, the gradients of `parameters` and `buffers` after it against `expected`.
void check_eager_step(const std::vector<NamedTensor>& parameters, const std::vector<NamedTensor>& buffers,
                      const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& call,
                      const EagerStep& expected, const std::string& label);

// A file torch.save wrote (a dict of tensors, lists and dicts of tensors, numbers, strings).
c10::Dict<c10::IValue, c10::IValue> load_saved_dict(const std::filesystem::path& path);
std::vector<at::Tensor> tensor_list(const c10::IValue& list);
std::map<std::string, at::Tensor> tensor_dict(const c10::IValue& dict);

// Copies archive `from` to `to` (a .pt2 whose stem becomes its top folder), passing models/*.json
// through `edit_model` and every other text record through `edit_record(name, bytes)`.
void rewrite_archive(const std::filesystem::path& from, const std::filesystem::path& to,
                     const std::function<void(nlohmann::json&)>& edit_model,
                     const std::function<void(const std::string&, std::string&)>& edit_record = {});

// Makes the zip (bytes in memory) claim `bytes` of uncompressed size for its first record whose
// name ends in `suffix`, and marks it deflated so the claim is not bounded by the stored bytes:
// the central directory entry's method (+10) and size (+24). false where no record ends so.
bool claim_size(std::string& zip, const std::string& suffix, std::uint32_t bytes);

}  // namespace aotpipe::testing
