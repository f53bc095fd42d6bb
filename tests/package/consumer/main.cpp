// Uses an installed aotpipe: parses a graph, verifies it, prints it, runs it in the
// Interpreter on known inputs and checks every value of the result. Exit status 0 only when
// everything is right.
#include <aotpipe/aotpipe.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

int main() {
  try {
    aotpipe::Graph graph = aotpipe::parse_graph(R"(
graph consumer(%x: f32[2, 3], %w: f32[3, 2]):
  %m: f32[2, 2] = aten::mm(%x, %w)
  %s: f32[2, 2] = aten::sub.Scalar(%m, 5)
  %r: f32[2, 2] = aten::relu(%s)
  %t: f32[2, 2] stride=[1, 2] = aten::t(%r)
  return (%t)
)");
    aotpipe::verify(graph);
    std::printf("%s", aotpipe::print_graph(graph).c_str());

    // x = [[1, 2, 3], [4, 5, 6]], w = [[1, 0], [0, 1], [1, 1]]
    // x @ w = [[4, 5], [10, 11]]; - 5 -> [[-1, 0], [5, 6]]; relu -> [[0, 0], [5, 6]]; t.
    at::Tensor x = at::arange(1, 7, at::kFloat).view({2, 3});
    at::Tensor w = at::tensor({1.f, 0.f, 0.f, 1.f, 1.f, 1.f}).view({3, 2});
    aotpipe::Interpreter interpreter(graph, {.check_meta = true});
    std::vector<at::Tensor> out = interpreter.run({x, w});

    const float expected[2][2] = {{0, 5}, {0, 6}};
    if (out.size() != 1 || out[0].sizes() != at::IntArrayRef({2, 2})) {
      std::fprintf(stderr, "consumer: wrong result shape\n");
      return 1;
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        float got = out[0][i][j].item<float>();
        if (std::fabs(got - expected[i][j]) > 1e-6f) {
          std::fprintf(stderr, "consumer: result[%d][%d] = %g, expected %g\n", i, j, got, expected[i][j]);
          return 1;
        }
      }
    }
    std::printf("consumer: ok\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
