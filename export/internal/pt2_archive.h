#pragma once
// Reading the records of a .pt2 archive (a zip file with one top folder; see
// docs/pt2-format-2.11.md): the model JSON, the state tensors and the sample inputs.
#include <aotpipe/export/internal/serde.h>
#include <aotpipe/graph/mapped_file.h>

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace aotpipe::pt2 {

class Pt2Archive {
 public:
  // Opens the archive and checks its format and version records; throws Pt2Error. With
  // `map_weights`, state tensors stored uncompressed (as torch.export writes every record) are
  // views of the file mapped copy-on-write, so no byte of them is read until something touches
  // it (graph/mapped_file.h); otherwise, and for a record stored compressed, they are read.
  explicit Pt2Archive(const std::filesystem::path& path, bool map_weights = true);
  ~Pt2Archive();

  // The model's name ("model": models/model.json) and its parsed JSON, the schema version checked.
  const std::string& model_name() const { return model_name_; }
  Json model_json() const;

  // A state tensor by FQN, from the weights or the constants config (non-persistent buffers and
  // lifted constants are in the latter); entries naming the same file share one storage, and
  // entries naming the same file with the same metadata are one tensor: a tied parameter (GPT-2's
  // lm_head.weight is transformer.wte.weight) is one leaf under each of its names, as in eager.
  // Throws Pt2Error when neither config has `fqn`.
  at::Tensor state_tensor(const std::string& fqn, std::string_view what);

  // The sample inputs flattened (args, then kwargs in order); nullopt when the archive has none
  // or they hold something other than tensors. `note` says why they are absent.
  std::optional<std::vector<at::Tensor>> sample_inputs(std::string& note) const;

  // archive_compile_ingredients (exported_program.h).
  std::string compile_ingredients() const;

 private:
  // The record's size as its zip entry states it, refused (Pt2Error) where no archive of this
  // file's size could hold it: the readers allocate that many bytes before extracting.
  std::size_t record_size(const std::string& record) const;
  std::string read_string(const std::string& record) const;
  Json read_json(const std::string& record) const;
  at::Tensor payload_tensor(const std::string& dir, const std::string& fqn, const Json& payload);
  // The record as a flat tensor over the mapped file: nullopt where it is compressed or its
  // offset does not suit `dtype`.
  std::optional<at::Tensor> mapped_record(const std::string& record, std::size_t bytes, c10::ScalarType dtype);
  // The tensor `meta` describes over `flat`, the bytes of `record`; checks it fits.
  at::Tensor view_of(const at::Tensor& flat, const TensorMeta& meta, const std::string& fqn,
                     const std::string& record) const;

  std::filesystem::path path_;
  std::string where_;
  std::uintmax_t file_bytes_ = 0;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
  bool map_weights_ = true;
  std::shared_ptr<const MappedFile> file_;  // mapped at the first mapped record
  std::ifstream headers_;                   // the records' zip headers are read from here
  std::string model_name_;
  Json weights_;                                // FQN -> PayloadMeta
  Json constants_;                              // FQN -> PayloadMeta
  std::map<std::string, at::Tensor> storages_;  // record -> flat tensor over its bytes
  std::map<std::string, at::Tensor> tensors_;   // record + its tensor_meta -> the tensor made of it
};

}  // namespace aotpipe::pt2
