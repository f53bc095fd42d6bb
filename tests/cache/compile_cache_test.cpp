// The compile cache (cache/compile_cache.h): hits equal cold compiles byte for byte and behave
// as eager; the key follows each of its ingredients and ignores value names; damaged entries are
// recompiled with a warning; the size bound holds. Concurrency: concurrent_cache_test.cpp.
#include "aotpipe/compile_jobs.h"
#include "aotpipe/exported_programs.h"

#include "../runtime/temp_dir.h"

#include <aotpipe/runtime/artifact_serialization.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/driver/aot_module.h>
#include <aotpipe/graph/byte_codec.h>
#include <aotpipe/export/graph_signature.h>
#include <aotpipe/cache/cache_key.h>
#include <aotpipe/cache/compile_cache.h>
#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/runtime/eager_equivalence.h>
#include <aotpipe/runtime/graph_function.h>
#include <aotpipe/backend/backends.h>
#include <aotpipe/stages/compile/compile_stage.h>
#include <aotpipe/stages/partition/partition_stage.h>
#include <aotpipe/stages/metadata/collect_metadata.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace aotpipe {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kExamples = AOTPIPE_EXAMPLES_DIR;

using testing::TempDir;

// A cache in `dir` that records its warnings.
struct RecordingCache {
  std::mutex mutex;
  std::vector<std::string> warnings;
  std::shared_ptr<CompileCache> cache;
  explicit RecordingCache(const fs::path& dir, std::uint64_t max_bytes = 1ull << 30) {
    CompileCacheOptions options;
    options.directory = dir;
    options.max_bytes = max_bytes;
    options.on_warning = [this](std::string_view m) {
      std::lock_guard lock(mutex);
      warnings.emplace_back(m);
    };
    cache = std::make_shared<CompileCache>(std::move(options));
  }
};

// The job `aotpipe compile` makes of a graph file, with `cache`.
struct FileJob {
  cli::PreparedGraph prepared;
  CompileJob job;
};
FileJob file_job(const fs::path& path, std::shared_ptr<CompileCache> cache) {
  cli::JobSettings settings{"", 0, false, partitioners::min_cut_rematerialization_partition(), std::move(cache)};
  cli::GraphRow row;
  FileJob out{cli::prepare({path, ""}, settings, row), {}};
  if (!out.prepared.job) throw std::runtime_error(fmt::format("{}: {}", path.string(), row.message));
  out.job = *out.prepared.job;
  return out;
}

CompileOutput compile_job(const CompileJob& job) {
  return compile(job.name, job.fn, job.example_args, job.config, job.program, job.cache);
}

// Every graph of a compile in the text form, and its metadata: what a hit must reproduce.
std::string printed(const CompileState& s) {
  std::string out = to_json(s.function.meta);
  if (s.traced.joint) out += print_graph(s.traced.joint->graph);
  if (s.partition) out += print_graph(s.partition->forward) + print_graph(s.partition->backward);
  if (s.traced.inference_graph) out += print_graph(*s.traced.inference_graph);
  return out;
}

std::vector<fs::path> corpus() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kExamples))
    if (e.path().extension() == ".aotg") files.push_back(e.path());
  for (const char* pt2 : {"buffer_mutation_const.pt2", "buffer_mutation_const.aten.pt2", "lstm_tagger.pt2"})
    files.push_back(kExamples / "pt2" / pt2);
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> check_hit_against_eager(const FileJob& f, const CompileOutput& hit) {
  if (f.prepared.program) {
    const ExportedProgram& program = *f.prepared.program;
    return compare_with_eager(program.flat_function(), hit.runtime,
                              [&program] { return cli::check_inputs(program, 1); });
  }
  const Graph& graph = *f.prepared.graph;
  return compare_with_eager(graph_function(f.prepared.graph), hit.runtime, [&graph] {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    return example_args(graph, gen);
  });
}

TEST(CompileCache, HitsEqualColdCompilesByteForByteAndBehaveAsEager) {
  TempDir dir;
  RecordingCache cold(dir.path), warm(dir.path);  // two caches on one folder: two processes
  std::size_t graphs = 0;
  for (const fs::path& path : corpus()) {
    SCOPED_TRACE(path.filename().string());
    FileJob first = file_job(path, cold.cache);
    const CompileOutput miss = compile_job(first.job);
    ASSERT_EQ(miss.cache.outcome, CacheOutcome::Miss) << miss.cache.note;
    FileJob again = file_job(path, warm.cache);
    const CompileOutput hit = compile_job(again.job);
    ASSERT_EQ(hit.cache.outcome, CacheOutcome::Hit) << hit.cache.note;
    EXPECT_EQ(hit.cache.key, miss.cache.key);
    EXPECT_EQ(printed(*hit.state()), printed(*miss.state()));
    EXPECT_EQ(hit.state()->function.meta, miss.state()->function.meta);
    EXPECT_EQ(hit.artifact->wrappers, miss.artifact->wrappers);
    EXPECT_EQ(serialize_artifact(*hit.artifact), serialize_artifact(*miss.artifact));
    EXPECT_THAT(check_hit_against_eager(again, hit), ::testing::IsEmpty());
    ++graphs;
  }
  EXPECT_GE(graphs, 70u);
  EXPECT_EQ(warm.cache->counters().hits, graphs);
  EXPECT_EQ(cold.cache->counters().misses, graphs);
  EXPECT_TRUE(cold.warnings.empty() && warm.warnings.empty());
}

TEST(CompileCache, ArtifactBytesRoundTrip) {
  FileJob f = file_job(kExamples / "lstm_cell.aotg", nullptr);  // has tensor constants
  const CompileOutput out = compile_job(f.job);
  const std::string bytes = serialize_artifact(*out.artifact);
  EXPECT_EQ(serialize_artifact(deserialize_artifact(bytes)), bytes);
  EXPECT_EQ(out.cache.outcome, CacheOutcome::Off);
}

// A crafted artifact whose graph records nest a million levels deep (CBOR arrays of one
// element) is refused by name when its graphs are first used; a recursive reader would overflow
// the stack on it. Its header is well formed: an inference artifact of no inputs and outputs.
TEST(CompileCache, DeeplyNestedGraphRecordsAreRefusedNotACrash) {
  const std::string records = std::string(1'000'000, '\x81') + '\x01';
  ByteWriter header;
  header.u64(artifact_schema_version());
  header.u64(0);  // the graph records: all of the data
  header.u64(records.size());
  header.str("nested");                                // name
  header.u64(0);                                       // runtime plans
  for (int list = 0; list < 2; ++list) header.u64(0);  // input and output info
  header.u64(0);                                       // intermediate bases
  header.boolean(false);                               // keep_input_mutations
  header.u64(0);                                       // traced tangents
  header.boolean(false);                               // is_train
  header.u64(0);                                       // grad_enabled_mutation
  header.boolean(false);                               // training
  for (int list = 0; list < 2; ++list) header.u64(0);  // grad_inputs, undefined_grads
  header.u64(0);                                       // num_saved
  for (int list = 0; list < 3; ++list) header.u64(0);  // devices, cpu fallbacks, backend notes
  const std::string h = header.take();
  const std::uint64_t header_length = h.size();
  const std::string bytes =
      std::string(reinterpret_cast<const char*>(&header_length), sizeof header_length) + h + records;
  const CompiledArtifact artifact = deserialize_artifact(bytes);  // the header alone is read
  EXPECT_FALSE(artifact.graphs_decoded());
  try {
    (void)artifact.traced();
    ADD_FAILURE() << "deeply nested graph records were accepted";
  } catch (const ArtifactFormatError& e) { EXPECT_THAT(e.what(), HasSubstr("nested deeper than 64 levels")); }
}

// A hit reads the header only: its graphs are decoded and backend-compiled when they first run
// (the forward and backward at the first call), the joint graph when something inspects it.
TEST(CompileCache, AHitDecodesItsGraphsOnlyWhenTheyAreUsed) {
  TempDir dir;
  RecordingCache cold(dir.path), warm(dir.path);
  FileJob first = file_job(kExamples / "mlp_layer.aotg", cold.cache);
  const CompileOutput miss = compile_job(first.job);
  ASSERT_EQ(miss.cache.outcome, CacheOutcome::Miss);
  EXPECT_TRUE(miss.artifact->graphs_decoded());  // a compile's artifact has its graphs
  FileJob again = file_job(kExamples / "mlp_layer.aotg", warm.cache);
  const CompileOutput hit = compile_job(again.job);
  ASSERT_EQ(hit.cache.outcome, CacheOutcome::Hit);
  EXPECT_FALSE(hit.artifact->traced_decoded());
  EXPECT_FALSE(hit.artifact->partition_decoded());
  EXPECT_THAT(check_hit_against_eager(again, hit), ::testing::IsEmpty());  // forward and backward run
  EXPECT_TRUE(hit.artifact->partition_decoded());
  EXPECT_FALSE(hit.artifact->traced_decoded()) << "running needs the partition, not the joint graph";
  EXPECT_EQ(printed(*hit.state()), printed(*miss.state()));
  EXPECT_TRUE(hit.artifact->traced_decoded());
}

// --- The key ------------------------------------------------------------------------------------

// x[rows, 8] @ w[8, 3], then `activation`.
std::string mm_graph(std::string_view activation, int rows = 4) {
  return fmt::format(R"(graph g(%x: f32[{0}, 8] requires_grad, %w: f32[8, 3] requires_grad):
  %y: f32[{0}, 3] = aten::mm(%x, %w)
  %z: f32[{0}, 3] = aten::{1}(%y)
  return (%z)
)",
                     rows, activation);
}

struct KeyCase {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>(parse_graph(mm_graph("relu")));
  TensorList args = {at::randn({4, 8}).requires_grad_(), at::randn({8, 3}).requires_grad_()};
  AotConfig config;
  std::string pipeline = default_compile_pipeline_text();
  std::string key(bool with_program = true) const {
    const CacheKeyOrBypass k =
        make_cache_key(with_program ? graph.get() : nullptr, graph_function(graph), args, config, pipeline);
    if (!k.key) throw std::runtime_error("bypassed: " + k.bypass_reason);
    return k.key->digest;
  }
};

const std::string kBase = KeyCase{}.key();

TEST(CacheKey, IsDeterministicAndIgnoresValueAndGraphNames) {
  EXPECT_EQ(KeyCase{}.key(), kBase);
  KeyCase renamed;
  renamed.graph =
      std::make_shared<Graph>(parse_graph(R"(graph other_name(%a: f32[4, 8] requires_grad, %b: f32[8, 3] requires_grad):
  %mm_out: f32[4, 3] = aten::mm(%a, %b)
  %result: f32[4, 3] = aten::relu(%mm_out)
  return (%result)
)"));
  EXPECT_EQ(renamed.key(), kBase);
  EXPECT_EQ(canonical_graph_text(*renamed.graph), canonical_graph_text(*KeyCase{}.graph));
}

TEST(CacheKey, ChangesWithTheProgram) {
  KeyCase c;
  c.graph = std::make_shared<Graph>(parse_graph(mm_graph("sigmoid")));
  EXPECT_NE(c.key(), kBase);
}

TEST(CacheKey, ChangesWithTensorConstantData) {
  auto with_constant = [](float value) {
    KeyCase c;
    c.graph = std::make_shared<Graph>(parse_graph(R"(graph g(%x: f32[4, 8] requires_grad, %w: f32[8, 3] requires_grad):
  %y: f32[4, 3] = aten::mm(%x, %w)
  %b: f32[3] = constant("bias")
  %z: f32[4, 3] = aten::add.Tensor(%y, %b)
  return (%z)
)"));
    c.graph->bind_constant("bias", at::full({3}, value));
    return c.key();
  };
  EXPECT_EQ(with_constant(1.f), with_constant(1.f));
  EXPECT_NE(with_constant(1.f), with_constant(2.f));
}

TEST(CacheKey, ChangesWithInputSizes) {
  KeyCase c;
  c.graph = std::make_shared<Graph>(parse_graph(mm_graph("relu", 5)));
  c.args[0] = at::randn({5, 8}).requires_grad_();
  EXPECT_NE(c.key(), kBase);
}

TEST(CacheKey, ChangesWithInputStrides) {
  KeyCase c;
  c.args[0] = at::randn({8, 4}).t().requires_grad_();
  EXPECT_NE(c.key(), kBase);
}

TEST(CacheKey, ChangesWithInputDtype) {
  KeyCase c;
  c.args[1] = at::randn({8, 3}, at::kDouble).requires_grad_();
  EXPECT_NE(c.key(), kBase);
}

TEST(CacheKey, ChangesWithInputDevice) {
  KeyCase c;
  c.args[0] = at::empty({4, 8}, at::TensorOptions().device(c10::kMeta)).requires_grad_();
  EXPECT_NE(c.key(), kBase);
}

TEST(CacheKey, ChangesWithRequiresGrad) {
  KeyCase c;
  c.args[1] = at::randn({8, 3});
  EXPECT_NE(c.key(), kBase);
}

TEST(CacheKey, ChangesWithTheDuplicatePattern) {
  KeyCase distinct, duplicated;
  distinct.graph = duplicated.graph = std::make_shared<Graph>(parse_graph(R"(graph g(%x: f32[4, 4], %w: f32[4, 4]):
  %y: f32[4, 4] = aten::mm(%x, %w)
  return (%y)
)"));
  const at::Tensor t = at::randn({4, 4});
  distinct.args = {t, at::randn({4, 4})};
  duplicated.args = {t, t};
  EXPECT_NE(distinct.key(), duplicated.key());
}

TEST(CacheKey, ChangesWithTheAliasPattern) {
  KeyCase separate, aliased;
  separate.graph = aliased.graph = std::make_shared<Graph>(parse_graph(R"(graph g(%x: f32[4], %w: f32[4]):
  %y: f32[4] = aten::mul.Tensor(%x, %w)
  return (%y)
)"));
  const at::Tensor base = at::randn({8});
  separate.args = {at::randn({8}).narrow(0, 0, 4), at::randn({8}).narrow(0, 4, 4)};
  aliased.args = {base.narrow(0, 0, 4), base.narrow(0, 4, 4)};
  EXPECT_NE(separate.key(), aliased.key());
}

TEST(CacheKey, ChangesWithGradMode) {
  at::NoGradGuard no_grad;
  EXPECT_NE(KeyCase{}.key(), kBase);
}

TEST(CacheKey, ChangesWithThePipeline) {
  KeyCase c;
  c.pipeline = "metadata,dedupe,synthetic_base,joint,partition(default),compile";
  EXPECT_NE(c.key(), kBase);
}

// A compile keys on its pipeline's text form (Pipeline::to_string): a partition stage's own
// partitioner must show there, or pipelines that partition differently would share entries.
TEST(CacheKey, ChangesWithThePartitionStagesOwnPartitioner) {
  const auto text_of = [](const std::string& text) { return compile_stage_registry().parse(text, "aot").to_string(); };
  KeyCase named;
  named.pipeline = text_of("metadata,dedupe,synthetic_base,joint,partition(default),compile");
  EXPECT_EQ(named.pipeline, "metadata,dedupe,synthetic_base,joint,partition(default),compile");
  EXPECT_NE(named.key(), kBase);
  KeyCase plain;
  plain.pipeline = text_of(default_compile_pipeline_text());
  EXPECT_EQ(plain.key(), kBase);
  // An override the text cannot name is not keyed as the plain stage: the pipeline bypasses.
  Pipeline<CompileState> custom = compile_stage_registry().parse(default_compile_pipeline_text(), "aot");
  custom.replace("partition", PartitionStage{partitioners::default_partition()});
  KeyCase c;
  c.pipeline = custom.to_string();
  EXPECT_THAT(c.pipeline, HasSubstr("partition(aotpipe.default"));
  EXPECT_THAT(make_cache_key(c.graph.get(), graph_function(c.graph), c.args, c.config, c.pipeline).bypass_reason,
              HasSubstr("not built in"));
}

TEST(CacheKey, ChangesWithThePartitionerAndItsOptions) {
  KeyCase c;
  c.config.partition_fn = partitioners::default_partition();
  EXPECT_NE(c.key(), kBase);
  partitioners::MinCutOptions options;
  options.recompute_views = true;
  c.config.partition_fn = partitioners::min_cut_rematerialization_partition(options);
  EXPECT_NE(c.key(), kBase);
  c.config.partition_fn = partitioners::min_cut_rematerialization_partition();
  EXPECT_NE(c.key(), kBase) << "PyTorch's settings are not the interpreter's";
  partitioners::MinCutOptions unfused;
  unfused.ban_recompute_used_far_apart = false;
  c.config.partition_fn = partitioners::min_cut_rematerialization_partition(unfused);
  EXPECT_EQ(c.key(), kBase);  // the interpreter's default, named explicitly
}

Compiler renamed_interpreter(std::string identity) {
  return named_compiler(std::move(identity), backends::interpreter());
}

TEST(CacheKey, ChangesWithEachCompilerIdentity) {
  std::set<std::string> keys{kBase};
  KeyCase fw, bw, inference;
  fw.config.fw_compiler = renamed_interpreter("acme.fw/2");
  bw.config.bw_compiler = renamed_interpreter("acme.bw/2");
  inference.config.inference_compiler = renamed_interpreter("acme.inference/2");
  for (const KeyCase* c : {&fw, &bw, &inference}) EXPECT_TRUE(keys.insert(c->key()).second);
}

TEST(CacheKey, ChangesWithEachOption) {
  std::set<std::string> keys{kBase};
  KeyCase params, keep, fallback;
  params.config.num_params_buffers = 1;
  keep.config.keep_inference_input_mutations = true;
  fallback.config.allow_cpu_fallback = false;
  for (const KeyCase* c : {&params, &keep, &fallback}) EXPECT_TRUE(keys.insert(c->key()).second);
}

TEST(CacheKey, HoldsTheVersionsAndChangesWithThem) {
  KeyCase c;
  const CacheKeyOrBypass k = make_cache_key(c.graph.get(), graph_function(c.graph), c.args, c.config, c.pipeline);
  ASSERT_TRUE(k.key);
  std::map<std::string, std::string> ingredients(k.key->ingredients.begin(), k.key->ingredients.end());
  EXPECT_EQ(ingredients["aotpipe"], aotpipe_build_id());
  EXPECT_THAT(ingredients["aotpipe"], HasSubstr("0."));
  EXPECT_EQ(ingredients["libtorch"], "2.11.0");
  EXPECT_EQ(ingredients["artifact_schema"], std::to_string(artifact_schema_version()));
  EXPECT_EQ(cache_key_digest(k.key->ingredients), k.key->digest);
  for (const char* version : {"aotpipe", "libtorch", "artifact_schema"}) {
    auto changed = k.key->ingredients;
    for (auto& [name, value] : changed)
      if (name == version) value += "+1";
    EXPECT_NE(cache_key_digest(changed), k.key->digest) << version;
  }
}

TEST(CacheKey, ATracedFunctionKeysOnItsTrace) {
  KeyCase traced, other;
  EXPECT_EQ(traced.key(false), KeyCase{}.key(false));
  EXPECT_NE(traced.key(false), kBase);  // "traced" programs never share entries with graph files
  other.graph = std::make_shared<Graph>(parse_graph(mm_graph("tanh")));
  EXPECT_NE(other.key(false), traced.key(false));
}

TEST(CacheKey, CallablesWithoutIdentityAndUserStagesBypass) {
  KeyCase c;
  c.config.fw_compiler = [](const Graph& g, const std::vector<TensorMeta>& metas) {
    return backends::interpreter()(g, metas);
  };
  CacheKeyOrBypass k = make_cache_key(c.graph.get(), graph_function(c.graph), c.args, c.config, c.pipeline);
  EXPECT_FALSE(k.key);
  EXPECT_THAT(k.bypass_reason, HasSubstr("fw_compiler has no stable identity"));
  KeyCase p;
  p.config.partition_fn = [](const JointGraph& j) { return partitioners::default_partition(j); };
  EXPECT_THAT(make_cache_key(p.graph.get(), graph_function(p.graph), p.args, p.config, p.pipeline).bypass_reason,
              HasSubstr("partition_fn has no stable identity"));
  KeyCase s;
  s.pipeline = "metadata,my_stage,compile";
  EXPECT_THAT(make_cache_key(s.graph.get(), graph_function(s.graph), s.args, s.config, s.pipeline).bypass_reason,
              HasSubstr("not built in"));
}

// --- aot_function -------------------------------------------------------------------------------

// A hit's CompileState has no example arguments (it ran no stage): what is built from the state
// afterwards, such as a module's graph signature, must not need them.
TEST(CompileCache, AModulesHitHasTheGraphSignatureOfItsColdCompile) {
  TempDir dir;
  RecordingCache rc(dir.path);
  torch::manual_seed(5);
  auto linear = std::make_shared<torch::nn::LinearImpl>(4, 3);
  const ModuleForward forward = [](torch::nn::Module& m, const TensorList& a) {
    return TensorList{static_cast<torch::nn::LinearImpl&>(m).forward(a[0]).relu().sum()};
  };
  const TensorList x = {torch::randn({2, 4})};
  const CompiledModule cold = aot_module(linear, forward, {}, rc.cache);
  const std::string cold_signature = to_json(graph_signature(cold, x, 0));
  EXPECT_EQ(rc.cache->counters().misses, 1u);
  const CompiledModule warm = aot_module(linear, forward, {}, rc.cache);
  EXPECT_EQ(to_json(graph_signature(warm, x, 0)), cold_signature);
  EXPECT_EQ(rc.cache->counters().hits, 1u);
  EXPECT_THAT(cold_signature, HasSubstr("LOSS_OUTPUT"));
  // The hit computes what eager does, gradients of the parameters included.
  const at::Tensor loss = warm(x)[0];
  loss.backward();
  const at::Tensor compiled_grad = linear->weight.grad().clone();
  linear->weight.mutable_grad().reset();
  const at::Tensor eager_loss = forward(*linear, x)[0];
  eager_loss.backward();
  EXPECT_TRUE(at::allclose(loss, eager_loss));
  EXPECT_TRUE(at::allclose(compiled_grad, linear->weight.grad()));
}

TEST(CompileCache, AotFunctionsFirstCallHitsInANewFunction) {
  TempDir dir;
  RecordingCache rc(dir.path);
  const Function fn = [](const TensorList& a) { return TensorList{(a[0].sin() * a[1]).sum(1)}; };
  auto inputs = [] {
    at::manual_seed(3);
    return TensorList{at::randn({3, 5}).requires_grad_(), at::randn({3, 5})};
  };
  const CompiledFunction first = aot_function(fn, {}, rc.cache);
  (void)first(inputs());
  EXPECT_EQ(rc.cache->counters().misses, 1u);
  const CompiledFunction second = aot_function(fn, {}, rc.cache);  // a new process would do the same
  EXPECT_THAT(compare_with_eager(
                  fn, [&](const TensorList& a) { return second(a); }, inputs),
              ::testing::IsEmpty());
  EXPECT_EQ(rc.cache->counters().hits, 1u);
  EXPECT_EQ(second.compiled_state(inputs())->partition->forward.num_nodes(),
            first.compiled_state(inputs())->partition->forward.num_nodes());

  AotConfig lambda_config;
  lambda_config.fw_compiler = [](const Graph& g, const std::vector<TensorMeta>& m) {
    return backends::interpreter()(g, m);
  };
  const CompileOutput bypassed = compile("lambda", fn, inputs(), lambda_config, nullptr, rc.cache);
  EXPECT_EQ(bypassed.cache.outcome, CacheOutcome::Bypassed);
  EXPECT_THAT(bypassed.cache.note, HasSubstr("no stable identity"));
}

// --- Damaged entries ----------------------------------------------------------------------------

struct DamagedEntry : ::testing::Test {
  TempDir dir;
  RecordingCache rc{dir.path};
  FileJob f = file_job(kExamples / "mlp_layer.aotg", rc.cache);
  fs::path entry;

  void SetUp() override {
    const CompileOutput miss = compile_job(f.job);
    ASSERT_EQ(miss.cache.outcome, CacheOutcome::Miss);
    entry = rc.cache->entry_path(miss.cache.key);
    ASSERT_TRUE(fs::exists(entry));
  }
  std::string read() {
    std::ifstream in(entry, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write(const std::string& bytes) { std::ofstream(entry, std::ios::binary | std::ios::trunc) << bytes; }
  // The next compile recompiles, warns naming `why`, and repairs the entry (the one after hits).
  void expect_recompiled_with_warning(const std::string& why) {
    const CompileOutput again = compile_job(f.job);
    EXPECT_EQ(again.cache.outcome, CacheOutcome::Miss);
    EXPECT_THAT(again.cache.note, HasSubstr(why));
    ASSERT_EQ(rc.warnings.size(), 1u);
    EXPECT_THAT(rc.warnings[0], HasSubstr(why));
    EXPECT_THAT(rc.warnings[0], HasSubstr(entry.string()));
    EXPECT_EQ(compile_job(f.job).cache.outcome, CacheOutcome::Hit);
  }
};

TEST_F(DamagedEntry, TruncatedIsRecompiled) {
  const std::string bytes = read();
  write(bytes.substr(0, bytes.size() / 2));
  expect_recompiled_with_warning("truncated");
}

TEST_F(DamagedEntry, GarbageIsRecompiled) {
  write(std::string(300, '\x5a'));
  expect_recompiled_with_warning("not an aotpipe cache entry");
}

TEST_F(DamagedEntry, EmptyIsRecompiled) {
  write("");
  expect_recompiled_with_warning("not an aotpipe cache entry");
}

TEST_F(DamagedEntry, AnotherEntryVersionIsRecompiled) {
  std::string bytes = read();
  bytes[8] = static_cast<char>(CompileCache::kEntryVersion + 1);  // the version follows the 8-byte magic
  write(bytes);
  expect_recompiled_with_warning("entry format");
}

TEST_F(DamagedEntry, AFlippedPayloadBitIsRecompiled) {
  std::string bytes = read();
  bytes[bytes.size() - 10] ^= 0x01;
  write(bytes);
  expect_recompiled_with_warning("checksum mismatch");
}

TEST_F(DamagedEntry, AnEntryUnderAnotherKeyIsRecompiled) {
  std::string bytes = read();
  const std::size_t key_at = 8 + 4 + 4;
  bytes[key_at] = bytes[key_at] == 'a' ? 'b' : 'a';
  write(bytes);
  expect_recompiled_with_warning("stored under another key");
}

TEST_F(DamagedEntry, AWellFormedEntryWithAMalformedArtifactIsRecompiled) {
  // A writer that computes a valid checksum over a payload that is not an artifact (CBOR, where
  // the artifact's header is expected).
  const std::string bytes = read();
  const std::size_t payload_at = 8 + 4 + 4 + 32 + 8 + 32;  // magic, version, key length, key, length, checksum
  const std::string cbor = "\xa1\x61\x78\x01";             // CBOR {"x": 1}, no tensor data
  const std::uint64_t cbor_length = cbor.size();
  const std::string payload = std::string(reinterpret_cast<const char*>(&cbor_length), sizeof cbor_length) + cbor;
  std::string header = bytes.substr(0, 8 + 4 + 4 + 32);
  const std::uint64_t length = payload.size();
  header.append(reinterpret_cast<const char*>(&length), sizeof length);
  header += content_hash_hex(payload);
  ASSERT_EQ(payload_at, header.size());
  write(header + payload);
  expect_recompiled_with_warning("malformed artifact");
}

// An entry that passes the checksum but holds a graph that does not parse (a forged entry: an
// accident changes the checksum). A hit reads only the header, so the graph is found malformed
// at its first call, which throws ArtifactFormatError naming the graph and the entry, and removes
// the entry: nothing crashes, nothing of it runs, and the next compile recompiles.
TEST_F(DamagedEntry, AForgedMalformedGraphFailsItsFirstCallByName) {
  std::string bytes = read();
  const std::size_t payload_at = 8 + 4 + 4 + 32 + 8 + 32;  // magic, version, key length, key, length, checksum
  const std::size_t text_at = bytes.find("graph forward(", payload_at);
  ASSERT_NE(text_at, std::string::npos) << "mlp_layer compiles for training: its entry has a forward graph";
  bytes[text_at + std::string_view("graph forward").size()] = ')';
  const std::string checksum = content_hash_hex(std::string_view(bytes).substr(payload_at));
  bytes.replace(payload_at - checksum.size(), checksum.size(), checksum);
  write(bytes);
  const CompileOutput hit = compile_job(f.job);
  ASSERT_EQ(hit.cache.outcome, CacheOutcome::Hit);
  EXPECT_TRUE(rc.warnings.empty());
  try {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    (void)hit.runtime(example_args(*f.prepared.graph, gen));
    ADD_FAILURE() << "a malformed forward graph ran";
  } catch (const ArtifactFormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("forward graph does not parse"));
    EXPECT_THAT(e.what(), HasSubstr(entry.string()));
  }
  EXPECT_FALSE(fs::exists(entry));
  EXPECT_EQ(compile_job(f.job).cache.outcome, CacheOutcome::Miss);
  EXPECT_EQ(compile_job(f.job).cache.outcome, CacheOutcome::Hit);
}

// The artifact's header is read from untrusted bytes: cut at every length it is refused, and
// with any byte changed it is refused or read, and its graphs then decode or are refused, always
// with ArtifactFormatError (never another exception, never a crash).
TEST(CompileCache, EveryCutOrChangedHeaderByteIsRefusedByName) {
  FileJob f = file_job(kExamples / "mlp_layer.aotg", nullptr);
  const std::string bytes = serialize_artifact(*compile_job(f.job).artifact);
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), sizeof header_length);
  const std::size_t header_end = sizeof header_length + header_length;
  ASSERT_LT(header_end, bytes.size());
  for (std::size_t cut = 0; cut < bytes.size(); cut += cut < header_end ? 1 : 97) {
    SCOPED_TRACE(cut);
    // Any cut loses the graph records at the data's end, which the header points at.
    EXPECT_THROW((void)deserialize_artifact(std::string_view(bytes).substr(0, cut)), ArtifactFormatError);
  }
  std::size_t refused = 0, read = 0;
  for (std::size_t at = 0; at < header_end; ++at) {
    for (const unsigned char flip : {0x01, 0x80, 0xff}) {
      SCOPED_TRACE(fmt::format("byte {} ^ {:#x}", at, flip));
      std::string changed = bytes;
      changed[at] = static_cast<char>(changed[at] ^ flip);
      try {
        const CompiledArtifact a = deserialize_artifact(changed);
        (void)a.traced();
        (void)a.partition();
        ++read;
      } catch (const ArtifactFormatError&) { ++refused; }
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(read, 0u) << "some changes (a flag, a name) leave a well-formed artifact";
}

// A hit refreshes an entry's time (the order of eviction) when it is more than an hour old, and
// leaves a recent one alone (hits write nothing).
TEST_F(DamagedEntry, AHitRefreshesTheTimeOfAnOldEntryOnly) {
  auto mtime = [&] { return fs::last_write_time(entry); };
  const auto written = mtime();
  ASSERT_EQ(compile_job(f.job).cache.outcome, CacheOutcome::Hit);
  EXPECT_EQ(mtime(), written);
  const auto old = written - std::chrono::hours(2);
  fs::last_write_time(entry, old);
  ASSERT_EQ(compile_job(f.job).cache.outcome, CacheOutcome::Hit);
  EXPECT_GT(mtime(), old + std::chrono::hours(1));
}

TEST_F(DamagedEntry, TemporaryFilesOfKilledWritersAreNeverRead) {
  std::ofstream(entry.parent_path() / ".tmp-99999-0-deadbeef", std::ios::binary) << "half an entry";
  EXPECT_EQ(rc.cache->stats().temporary_files, 1u);
  EXPECT_EQ(compile_job(f.job).cache.outcome, CacheOutcome::Hit);
  rc.cache->clear();
  EXPECT_EQ(rc.cache->stats().temporary_files, 0u);
  EXPECT_EQ(rc.cache->stats().entries, 0u);
}

// An entry of hundreds of KiB (tensor constants) is mapped, not read: its hit keeps the mapping,
// so it must still decode and run after the entry is removed or replaced (as eviction and a
// concurrent writer do: unlink, rename over), and equal eager.
TEST(CompileCache, AMappedHitOutlivesItsEntryRemovedOrReplaced) {
  for (const bool replace : {false, true}) {
    SCOPED_TRACE(replace ? "replaced" : "removed");
    TempDir dir;
    RecordingCache rc(dir.path);
    if (!rc.cache->maps_large_entries())
      GTEST_SKIP() << "the temporary folder " << dir.path << " is not on a local filesystem: entries are read there";
    const FileJob f = file_job(kExamples / "lstm_cell.aotg", rc.cache);
    const CompileOutput miss = compile_job(f.job);
    ASSERT_EQ(miss.cache.outcome, CacheOutcome::Miss);
    const fs::path entry = rc.cache->entry_path(miss.cache.key);
    ASSERT_GE(fs::file_size(entry), 256u * 1024) << "small enough to be read, not mapped";
    const CompileOutput hit = compile_job(f.job);
    ASSERT_EQ(hit.cache.outcome, CacheOutcome::Hit);
    EXPECT_EQ(rc.cache->counters().mapped, 1u);
    if (replace) {
      const fs::path other = dir.path / "other";
      std::ofstream(other, std::ios::binary) << std::string(fs::file_size(entry), '\x5a');
      fs::rename(other, entry);
    } else {
      fs::remove(entry);
    }
    EXPECT_EQ(printed(*hit.state()), printed(*miss.state()));  // decoded only now
    EXPECT_THAT(check_hit_against_eager(f, hit), ::testing::IsEmpty());
  }
}

// --- Records (CompileCache::store_record) ---------------------------------------------------------

fs::path record_file(const fs::path& dir, const std::string& digest) {
  return dir / fmt::format("v{}", CompileCache::kEntryVersion) / digest.substr(0, 2) / (digest + ".record");
}

TEST(CompileCacheRecords, RoundTripCountTowardsTheStatsAndAreCleared) {
  TempDir dir;
  RecordingCache rc(dir.path);
  const std::string digest = content_hash_hex("a record");
  EXPECT_EQ(rc.cache->load_record(digest), std::nullopt);
  const std::string payload("payload \0 with a zero", 21);
  rc.cache->store_record(digest, payload);
  EXPECT_EQ(rc.cache->load_record(digest), payload);
  EXPECT_EQ(rc.cache->load_record(content_hash_hex("another")), std::nullopt);
  const CompileCacheStats stats = rc.cache->stats();
  EXPECT_EQ(stats.records, 1u);
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_GT(stats.bytes, payload.size());
  rc.cache->clear();
  EXPECT_EQ(rc.cache->stats().records, 0u);
  EXPECT_EQ(rc.cache->load_record(digest), std::nullopt);
  EXPECT_TRUE(rc.warnings.empty());
}

TEST(CompileCacheRecords, DamagedOrMisplacedRecordsAreRemovedWithAWarning) {
  TempDir dir;
  RecordingCache rc(dir.path);
  const std::string digest = content_hash_hex("a record"), other = content_hash_hex("other");
  rc.cache->store_record(other, "the other record");
  const fs::path other_file = record_file(dir.path, other);
  ASSERT_TRUE(fs::exists(other_file));
  std::ifstream in(other_file, std::ios::binary);
  const std::string framed((std::istreambuf_iterator<char>(in)), {});
  const fs::path file = record_file(dir.path, digest);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"garbage", std::string(100, 'x')},
      {"truncated", framed.substr(0, framed.size() - 3)},
      {"stored under another key", framed},
  };
  for (const auto& [why, bytes] : cases) {
    SCOPED_TRACE(why);
    rc.warnings.clear();
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << bytes;
    std::string warning;
    EXPECT_EQ(rc.cache->load_record(digest, &warning), std::nullopt);
    EXPECT_FALSE(fs::exists(file));
    ASSERT_EQ(rc.warnings.size(), 1u);
    EXPECT_THAT(rc.warnings[0], HasSubstr(file.string()));
    EXPECT_EQ(warning, rc.warnings[0]);
  }
  EXPECT_THAT(rc.warnings[0], HasSubstr("stored under another key"));
  // A record its caller cannot use goes the same way.
  rc.cache->reject_record(other, "its payload does not parse");
  EXPECT_FALSE(fs::exists(other_file));
  EXPECT_THAT(rc.warnings.back(), HasSubstr("its payload does not parse"));
}

TEST(CompileCacheRecords, AreEvictedUnderTheBoundOldestFirst) {
  TempDir dir;
  const std::string payload(10000, 'r');
  RecordingCache rc(dir.path, 5 * payload.size());
  std::vector<std::string> digests;
  for (int i = 0; i < 12; ++i) {
    digests.push_back(content_hash_hex(fmt::format("record {}", i)));
    rc.cache->store_record(digests.back(), payload);
    // Distinct times, oldest first (the file system's clock may be coarse).
    const fs::path file = record_file(dir.path, digests.back());
    fs::last_write_time(file, fs::file_time_type::clock::now() - std::chrono::minutes(60 - i));
    EXPECT_LE(rc.cache->stats().bytes, 5 * payload.size());
  }
  EXPECT_GT(rc.cache->counters().evictions, 0u);
  EXPECT_TRUE(rc.cache->load_record(digests.back()).has_value());
  EXPECT_FALSE(rc.cache->load_record(digests.front()).has_value());
}

// --- Concurrency and the bound ------------------------------------------------------------------

TEST(CompileCache, EvictionKeepsTheBoundAndTheRecentEntries) {
  TempDir dir;
  std::vector<fs::path> files;
  for (const char* name : {"mlp_layer", "views", "layer_norm", "lstm_cell", "gru_cell", "swiglu_ffn", "lenet5",
                           "transformer_ffn", "rms_norm_layer", "classifier_head"})
    files.push_back(kExamples / (std::string(name) + ".aotg"));
  // The bound: about three entries.
  std::uint64_t entry_bytes = 0;
  {
    TempDir probe;
    RecordingCache rc(probe.path);
    for (const fs::path& p : files) (void)compile_job(file_job(p, rc.cache).job);
    entry_bytes = rc.cache->stats().bytes / files.size();
  }
  const std::uint64_t bound = 3 * entry_bytes;
  RecordingCache rc(dir.path, bound);
  for (const fs::path& p : files) {
    (void)compile_job(file_job(p, rc.cache).job);
    EXPECT_LE(rc.cache->stats().bytes, bound);
  }
  EXPECT_GT(rc.cache->counters().evictions, 0u);
  EXPECT_LT(rc.cache->stats().entries, files.size());
  EXPECT_EQ(compile_job(file_job(files.back(), rc.cache).job).cache.outcome, CacheOutcome::Hit);
  EXPECT_EQ(compile_job(file_job(files.front(), rc.cache).job).cache.outcome, CacheOutcome::Miss);
}

}  // namespace
}  // namespace aotpipe
