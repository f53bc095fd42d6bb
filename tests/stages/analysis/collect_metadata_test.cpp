// Hand-checked metadata cases (the differential corpus against Python is in ../metadata).
#include <aotpipe/stages/metadata/collect_metadata.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace aotpipe {
namespace {

at::Tensor leaf(std::vector<int64_t> sizes) { return torch::randn(sizes).requires_grad_(true); }

TEST(CollectMetadata, DataMutationOfNonLeafInput) {
  at::Tensor x = leaf({3, 3}).clone();
  auto meta = collect_metadata(
      [](const TensorList& a) {
        a[0].mul_(2);
        return TensorList{a[0] * 3};
      },
      {x});
  ASSERT_EQ(meta.input_info.size(), 1u);
  EXPECT_TRUE(meta.input_info[0].mutates_data);
  EXPECT_FALSE(meta.input_info[0].mutates_metadata);
  EXPECT_FALSE(meta.input_info[0].is_leaf);
  EXPECT_EQ(meta.input_info[0].mutation_type(), MutationType::MutatedOutGraph);
  ASSERT_EQ(meta.output_info.size(), 1u);
  EXPECT_EQ(meta.output_info[0].output_type, OutputType::non_alias);
  EXPECT_EQ(meta.traced_tangents.size(), 2u);  // the mutated input, then the output
  std::cout << to_json(meta) << "\n";
}

TEST(CollectMetadata, OutputTypes) {
  at::Tensor x = leaf({4, 4});
  auto meta = collect_metadata(
      [](const TensorList& a) {
        at::Tensor y = a[0] * 2;
        return TensorList{a[0], a[0].view(-1), y.view(-1), y.t(), y, y.detach(), (a[0] + 1).view({2, 8})};
      },
      {x});
  std::cout << to_json(meta) << "\n";
  ASSERT_EQ(meta.output_info.size(), 7u);
  EXPECT_EQ(meta.output_info[0].output_type, OutputType::is_input);
  EXPECT_EQ(meta.output_info[1].output_type, OutputType::alias_of_input);
  EXPECT_EQ(meta.output_info[2].output_type, OutputType::alias_of_intermediate_base_is_user_output);
  EXPECT_EQ(meta.output_info[4].output_type, OutputType::non_alias);
  EXPECT_EQ(meta.output_info[6].output_type, OutputType::unsafe_view_alias);
}

TEST(CollectMetadata, MetadataMutationAndNoGrad) {
  at::Tensor x = torch::randn({2, 3});
  at::Tensor y = leaf({3}).clone();
  auto meta = collect_metadata(
      [](const TensorList& a) {
        a[0].t_();
        {
          torch::NoGradGuard g;
          a[1].add_(1);
        }
        return TensorList{a[0] + 1};
      },
      {x, y});
  std::cout << to_json(meta) << "\n";
  EXPECT_TRUE(meta.input_info[0].mutates_metadata);
  EXPECT_FALSE(meta.input_info[0].mutates_data);
  EXPECT_TRUE(meta.input_info[1].mutations_under_no_grad_or_inference_mode);
}

}  // namespace
}  // namespace aotpipe
