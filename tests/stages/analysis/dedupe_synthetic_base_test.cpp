// The dedupe and synthetic-base stages: calling conventions of the Notes' examples, the runtime
// checks, and each stage's pre-compile + post-compile halves composed around the transformed
// function run eagerly, which must behave exactly like the original function.
#include <aotpipe/stages/metadata/collect_metadata.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace aotpipe {
namespace {

using ::testing::HasSubstr;

AnalyzedFunction make_function(Function fn, TensorList args, bool needs_autograd = false) {
  AnalyzedFunction function;
  function.meta = collect_metadata(fn, args);
  function.fn = std::move(fn);
  function.args = std::move(args);
  function.needs_autograd = needs_autograd;
  return function;
}

bool same_storage(const at::Tensor& a, const at::Tensor& b) { return a.storage().is_alias_of(b.storage()); }

// Runs `fn` eagerly on `eager_args` and the wrapped runtime (the stages' post-compile halves
// around the transformed function, run eagerly) on `args`; outputs and inputs must agree.
void expect_same_as_eager(const Function& fn, const TensorList& eager_args, const TensorList& args,
                          const RuntimeFn& runtime) {
  TensorList expected = fn(eager_args);
  TensorList actual = runtime(args);
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(at::allclose(expected[i], actual[i])) << "output " << i;
    EXPECT_EQ(expected[i].sizes(), actual[i].sizes()) << "output " << i;
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    EXPECT_EQ(eager_args[i].sizes(), args[i].sizes()) << "input " << i;
    EXPECT_EQ(eager_args[i].strides(), args[i].strides()) << "input " << i;
    EXPECT_TRUE(at::equal(eager_args[i], args[i])) << "input " << i;
  }
}

TEST(SyntheticBase, NoteCallingConvention) {
  // Note [Handling mutations on an input that aliases other inputs]:
  //   f(a, c.view(-1), b.view(-1), b, c, d)  ->  f(c_base, b_base, a, d)
  at::Tensor a = torch::randn({4}), b = torch::randn({2, 2}), c = torch::randn({2, 2}), d = torch::randn({3});
  Function fn = [](const TensorList& x) {
    x[3].add_(1);  // b
    x[4].mul_(2);  // c
    return TensorList{x[0] + x[1] + x[2], x[5] * 2};
  };
  TensorList args{a, c.view(-1), b.view(-1), b, c, d};
  auto meta = collect_metadata(fn, args);
  auto merged = merge_view_inputs(args, meta.input_info, /*is_inference=*/true);
  ASSERT_TRUE(merged.has_value());
  ASSERT_EQ(merged->args.size(), 4u);
  EXPECT_TRUE(same_storage(merged->args[0], c));
  EXPECT_TRUE(same_storage(merged->args[1], b));
  EXPECT_TRUE(merged->args[2].is_same(a));
  EXPECT_TRUE(merged->args[3].is_same(d));
  ASSERT_EQ(merged->info.size(), 6u);
  EXPECT_EQ(std::get<std::size_t>(merged->info[0]), 2u);
  EXPECT_EQ(std::get<ViewOfSyntheticBase>(merged->info[1]).base_idx, 0u);
  EXPECT_EQ(std::get<ViewOfSyntheticBase>(merged->info[2]).base_idx, 1u);
  EXPECT_EQ(std::get<ViewOfSyntheticBase>(merged->info[3]).base_idx, 1u);
  EXPECT_EQ(std::get<ViewOfSyntheticBase>(merged->info[4]).base_idx, 0u);
  EXPECT_EQ(std::get<std::size_t>(merged->info[5]), 3u);
  // Regenerated views have the originals' metadata.
  TensorList unpacked = unpack_synthetic_bases(merged->args, merged->info);
  for (std::size_t i = 0; i < args.size(); ++i) {
    EXPECT_EQ(unpacked[i].sizes(), args[i].sizes()) << i;
    EXPECT_EQ(unpacked[i].strides(), args[i].strides()) << i;
    EXPECT_EQ(unpacked[i].storage_offset(), args[i].storage_offset()) << i;
    EXPECT_TRUE(same_storage(unpacked[i], args[i])) << i;
  }
}

TEST(SyntheticBase, StageMetadataAndEagerEquivalence) {
  Function fn = [](const TensorList& x) {
    x[3].add_(1);
    x[4].mul_(2);
    return TensorList{x[0] + x[1] + x[2], x[5] * 2};
  };
  auto make_args = [] {
    at::manual_seed(0);
    at::Tensor a = torch::randn({4}), b = torch::randn({2, 2}), c = torch::randn({2, 2}), d = torch::randn({3});
    return TensorList{a, c.view(-1), b.view(-1), b, c, d};
  };
  auto [function, info] = synthetic_base_pre_compile(make_function(fn, make_args()));
  ASSERT_TRUE(info.needed);
  ASSERT_EQ(function.meta.input_info.size(), 4u);
  EXPECT_TRUE(function.meta.input_info[0].mutates_data);  // c_base
  EXPECT_TRUE(function.meta.input_info[1].mutates_data);  // b_base
  EXPECT_FALSE(function.meta.input_info[2].mutates_data);
  EXPECT_FALSE(function.meta.input_info[3].mutates_data);
  // The metadata of the transformed function equals what collect_metadata finds on it.
  auto recollected = collect_metadata(function.fn, function.args);
  EXPECT_EQ(to_json(recollected), to_json(function.meta));

  TensorList eager = make_args();
  TensorList args = make_args();
  expect_same_as_eager(fn, eager, args, synthetic_base_post_compile(info, function.fn));
}

TEST(SyntheticBase, FalseAliasingKeepsSeparateInputs) {
  at::Tensor base = torch::randn({8});
  TensorList args{base.slice(0, 0, 4), base.slice(0, 4, 8)};
  Function fn = [](const TensorList& x) {
    x[0].mul_(2);
    return TensorList{x[0] + x[1]};
  };
  auto meta = collect_metadata(fn, args);
  EXPECT_FALSE(merge_view_inputs(args, meta.input_info, true).has_value());
  // Overlapping slices of the same storage do need a base.
  TensorList overlapping{base.slice(0, 0, 5), base.slice(0, 3, 8)};
  auto meta2 = collect_metadata(fn, overlapping);
  EXPECT_TRUE(merge_view_inputs(overlapping, meta2.input_info, true).has_value());
}

TEST(SyntheticBase, MetadataMutationOfAliasedInputIsReplayed) {
  Function fn = [](const TensorList& x) {
    x[0].mul_(2);
    x[1].t_();
    return TensorList{x[0] + 1};
  };
  auto make_args = [] {
    at::manual_seed(1);
    at::Tensor base = torch::randn({2, 3});
    return TensorList{base.view({2, 3}), base.view({2, 3})};
  };
  auto [function, info] = synthetic_base_pre_compile(make_function(fn, make_args()));
  ASSERT_TRUE(info.needed);
  EXPECT_EQ(info.aliased_arg_idx_with_metadata_mutations, std::vector<std::size_t>{1});
  ASSERT_EQ(function.meta.output_info.size(), 2u);  // the user output + input 1 returned for its metadata
  EXPECT_EQ(function.meta.output_info[1].output_type, OutputType::alias_of_input);
  TensorList eager = make_args();
  TensorList args = make_args();
  expect_same_as_eager(fn, eager, args, synthetic_base_post_compile(info, function.fn));
  EXPECT_EQ(args[1].sizes(), (std::vector<int64_t>{3, 2}));
}

TEST(SyntheticBase, DifferentDtypesAreRejected) {
  at::Tensor base = torch::randn({4});
  TensorList args{base, base.view(at::kInt)};
  Function fn = [](const TensorList& x) {
    x[0].add_(1);
    return TensorList{x[0] * 2};
  };
  auto meta = collect_metadata(fn, args);
  try {
    merge_view_inputs(args, meta.input_info, true);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("different dtypes"));
    EXPECT_THAT(e.what(), HasSubstr("inputs 0 and 1"));
  }
}

TEST(SyntheticBase, NonDifferentiableViewMutationIsRejectedInTraining) {
  at::Tensor storage_owner = torch::randn({4});
  at::Tensor a = at::empty({0}).set_(storage_owner.storage(), 0, {4}, {1}).requires_grad_(true);
  at::Tensor b = at::empty({0}).set_(storage_owner.storage(), 0, {4}, {1}).requires_grad_(true);
  Function fn = [](const TensorList& x) {
    x[0].detach().add_(1);
    return TensorList{x[0] * x[1]};
  };
  TensorList args{a, b};
  auto meta = collect_metadata(fn, args);
  ASSERT_TRUE(meta.input_info[0].mutates_data);
  try {
    merge_view_inputs(args, meta.input_info, /*is_inference=*/false);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("non-differentiable view input mutations"));
  }
  EXPECT_TRUE(merge_view_inputs(args, meta.input_info, /*is_inference=*/true).has_value());
}

TEST(Dedupe, UnmutatedDuplicateBecomesSeparateLeaf) {
  at::Tensor x = torch::randn({3}, torch::requires_grad());
  Function fn = [](const TensorList& a) { return TensorList{a[0] * a[1]}; };
  auto [function, info] = dedupe_pre_compile(make_function(fn, {x, x}));
  EXPECT_FALSE(info.specialized);
  ASSERT_EQ(function.args.size(), 2u);
  EXPECT_FALSE(function.args[0].is_same(function.args[1]));
  EXPECT_TRUE(function.args[1].is_leaf());
  EXPECT_TRUE(function.args[1].requires_grad());
  EXPECT_TRUE(same_storage(function.args[0], function.args[1]));
  RuntimeFn runtime = dedupe_post_compile(info, function.fn);
  EXPECT_TRUE(at::allclose(runtime({x, x})[0], x * x));
  at::Tensor y = torch::randn({3});
  try {
    runtime({x, y});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("input 1 was compiled as a duplicate of input 0"));
  }
}

TEST(Dedupe, MutatedDuplicateSpecializesTheGraph) {
  Function fn = [](const TensorList& a) {
    a[0].mul_(2);
    return TensorList{a[0] + a[1], a[2] * 3};
  };
  at::Tensor x = torch::randn({3}), z = torch::randn({3});
  AnalyzedFunction analyzed = make_function(fn, {x, x, z});
  ASSERT_EQ(analyzed.meta.input_info.size(), 3u);
  auto [function, info] = dedupe_pre_compile(std::move(analyzed));
  EXPECT_TRUE(info.specialized);
  EXPECT_EQ(info.keep_arg_mask, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(info.add_dupe_map, (std::vector<std::size_t>{0, 0, 1}));
  ASSERT_EQ(function.args.size(), 2u);
  ASSERT_EQ(function.meta.input_info.size(), 2u);
  EXPECT_TRUE(function.meta.input_info[0].mutates_data);
  EXPECT_EQ(to_json(collect_metadata(function.fn, function.args)), to_json(function.meta));

  at::Tensor ex = x.clone(), ez = z.clone();
  at::Tensor rx = x.clone(), rz = z.clone();
  RuntimeFn runtime = dedupe_post_compile(info, function.fn);
  expect_same_as_eager(fn, {ex, ex, ez}, {rx, rx, rz}, runtime);
  // The reverse: a distinct tensor where the graph expects the duplicate.
  try {
    runtime({rx, rx.clone(), rz});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("input 1 was compiled as a duplicate of input 0"));
  }
}

TEST(Dedupe, DistinctGraphRejectsDuplicatedCall) {
  Function fn = [](const TensorList& a) { return TensorList{a[0] - a[1]}; };
  at::Tensor x = torch::randn({3}), y = torch::randn({3});
  auto [function, info] = dedupe_pre_compile(make_function(fn, {x, y}));
  RuntimeFn runtime = dedupe_post_compile(info, function.fn);
  try {
    runtime({x, x});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("input 1 is the same tensor as input 0"));
  }
}

}  // namespace
}  // namespace aotpipe
