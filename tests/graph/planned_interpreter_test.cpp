// The interpreter on a graph's memory plan (InterpreterOptions::plan_memory): calls with out=
// kernels write into one arena per run. Its results must be the plain interpreter's, bit for bit,
// whatever the arena is reused for afterwards; runs the plan does not fit, and out kernels that
// refuse, fall back to the plain path.
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/memory_plan.h>
#include <aotpipe/graph/op_properties.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/library.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "test_support.h"

namespace aotpipe {
namespace {

Interpreter planned(const Graph& g) {
  return Interpreter(g, InterpreterOptions{.check_meta = true, .reinplace = true, .plan_memory = true});
}

std::string out_name(const char* name, const char* overload) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  auto out = out_variant(op, c10::DispatchKey::CPU);
  return out ? c10::toString(out->operator_name()) : "none";
}

TEST(OutVariant, FindsTheOutOverloadWithAKernelOfItsOwn) {
  EXPECT_EQ(out_name("aten::add", "Tensor"), "aten::add.out");
  EXPECT_EQ(out_name("aten::mm", ""), "aten::mm.out");
  EXPECT_EQ(out_name("aten::sum", "dim_IntList"), "aten::sum.IntList_out");
  EXPECT_EQ(out_name("aten::gelu", ""), "aten::gelu.out");
  // Generated out= wrappers (the functional kernel, then a copy), several results, random draws,
  // views and in-place ops have none.
  EXPECT_EQ(out_name("aten::convolution", ""), "none");
  EXPECT_EQ(out_name("aten::max", "dim"), "none");
  EXPECT_EQ(out_name("aten::native_layer_norm", ""), "none");
  EXPECT_EQ(out_name("aten::bernoulli", ""), "none");
  EXPECT_EQ(out_name("aten::rand_like", ""), "none");
  EXPECT_EQ(out_name("aten::view", ""), "none");
  EXPECT_EQ(out_name("aten::add_", "Tensor"), "none");
}

// A CUDA graph whose first call works on a 0-dim CPU scalar (which stays on the CPU) plans its
// CUDA calls into a GPU arena, not into the CPU's, where none of them could write. Planning
// makes no CUDA call, so this runs without a GPU.
TEST(PlannedInterpreter, ACudaGraphStartingWithACpuScalarPlansOnTheGpu) {
  Graph g = parse_graph(R"(
graph on_gpu(%x: f32[16, 32] device=cuda:0, %s: f32[]):
  %t: f32[] = aten::mul.Scalar(%s, 2)
  %a: f32[16, 32] device=cuda:0 = aten::mul.Tensor(%x, %t)
  %b: f32[16, 32] device=cuda:0 = aten::tanh(%a)
  %c: f32[16, 32] device=cuda:0 = aten::add.Tensor(%b, %a)
  return (%c)
)");
  verify(g);
  const Interpreter interp(g, InterpreterOptions{.plan_memory = true});
  EXPECT_EQ(interp.num_planned_calls(), 2u) << "%a and %b, on the GPU (%t: a CPU scalar; %c escapes)";
  EXPECT_EQ(interp.arena_bytes(), 2u * 16 * 32 * 4);
}

TEST(PlannedInterpreter, CallsWithOutKernelsWriteIntoTheArena) {
  Graph g = parse_graph(R"(
graph mlp(%x: f32[16, 32], %w: f32[32, 32]):
  %a: f32[16, 32] = aten::mm(%x, %w)
  %b: f32[16, 32] = aten::tanh(%a)
  %c: f32[16, 32] = aten::mm(%b, %w)
  %d: f32[16, 32] = aten::add.Tensor(%c, %a)
  %s: f32[] = aten::sum(%d)
  return (%s, %d)
)");
  verify(g);
  const Interpreter interp = planned(g);
  // %a, %b and %c are planned (%d escapes: an output); sum's result escapes too.
  EXPECT_EQ(interp.num_planned_calls(), 3u);
  EXPECT_EQ(interp.arena_bytes(), 3u * 16 * 32 * 4) << "%a lives to the add: %b and %c overlap it";
  const InterpreterCounters before = interpreter_counters();
  at::Tensor x = at::randn({16, 32}), w = at::randn({32, 32});
  const auto expected = Interpreter(g).run({x, w});
  const auto first = interp.run({x, w});
  ASSERT_TRUE(testing::tensor_lists_close(expected, first, 0, 0));
  // The next run reuses the arena: what the first returned must not change.
  const std::vector<at::Tensor> first_copy{first[0].clone(), first[1].clone()};
  const auto second = interp.run({at::randn({16, 32}), w});
  EXPECT_TRUE(testing::tensor_lists_close(first_copy, first, 0, 0)) << "an output lived in the arena";
  EXPECT_FALSE(at::equal(second[1], first[1]));
  EXPECT_EQ(interpreter_counters().planned_runs, before.planned_runs + 2);
  EXPECT_EQ(interpreter_counters().out_calls_refused, before.out_calls_refused);
  release_cached_arenas();
  EXPECT_TRUE(testing::tensor_lists_close(expected, interp.run({x, w}), 0, 0));
}

// The arenas a thread keeps for its next run are freed from any thread (as autograd's device
// threads' must be, which no caller runs), and when their thread exits.
TEST(PlannedInterpreter, CachedArenasAreFreedFromAnotherThreadAndAtThreadExit) {
  Graph g = parse_graph(R"(
graph kept(%x: f32[64, 64]):
  %a: f32[64, 64] = aten::sin(%x)
  %b: f32[64, 64] = aten::mul.Tensor(%a, %a)
  %c: f32[64, 64] = aten::mm(%b, %b)
  return (%c)
)");
  verify(g);
  const Interpreter interp = planned(g);
  ASSERT_GT(interp.arena_bytes(), 0u);
  const at::Tensor x = at::randn({64, 64});
  const at::Tensor expected = Interpreter(g).run({x})[0];
  release_cached_arenas();
  ASSERT_EQ(cached_arena_bytes(), 0u);
  std::promise<void> ran, freed, ran_again, checked;
  std::thread worker([&] {
    EXPECT_TRUE(testing::tensors_close(expected, interp.run({x})[0], 0, 0));
    ran.set_value();
    freed.get_future().wait();
    EXPECT_TRUE(testing::tensors_close(expected, interp.run({x})[0], 0, 0)) << "on a new arena";
    ran_again.set_value();
    checked.get_future().wait();  // alive until the main thread has looked
  });
  ran.get_future().wait();
  EXPECT_GE(cached_arena_bytes(), interp.arena_bytes()) << "the worker keeps its arena";
  release_cached_arenas();
  EXPECT_EQ(cached_arena_bytes(), 0u);
  freed.set_value();
  ran_again.get_future().wait();
  EXPECT_GE(cached_arena_bytes(), interp.arena_bytes());
  checked.set_value();
  worker.join();
  EXPECT_EQ(cached_arena_bytes(), 0u) << "a thread's arenas go with it";
}

TEST(PlannedInterpreter, RunsThePlanDoesNotFitTakeThePlainPath) {
  Graph g = parse_graph(R"(
graph chain(%x: f32[8, 8], %y: f32[8, 8]):
  %a: f32[8, 8] = aten::mul.Tensor(%x, %y)
  %b: f32[8, 8] = aten::sin(%a)
  %c: f32[8, 8] = aten::mul.Tensor(%b, %y)
  return (%c)
)");
  verify(g);
  // Not checking metadata: the transposed input makes every result transposed too.
  const Interpreter interp(g, InterpreterOptions{.reinplace = true, .plan_memory = true});
  ASSERT_GT(interp.num_planned_calls(), 0u);
  at::Tensor y = at::randn({8, 8});
  const at::Tensor xt = at::randn({8, 8}).t();  // strides the plan was not made for
  InterpreterCounters before = interpreter_counters();
  EXPECT_TRUE(testing::tensors_close((xt * y).sin() * y, interp.run({xt, y})[0], 0, 0));
  EXPECT_EQ(interpreter_counters().unplanned_runs, before.unplanned_runs + 1);
  EXPECT_EQ(interpreter_counters().planned_runs, before.planned_runs);
  // Grad mode with an input that requires grad: out= kernels cannot record autograd history;
  // the plain path does, as the unplanned interpreter would.
  at::Tensor x = at::randn({8, 8}).requires_grad_();
  before = interpreter_counters();
  const at::Tensor c = interp.run({x, y})[0];
  EXPECT_EQ(interpreter_counters().unplanned_runs, before.unplanned_runs + 1);
  ASSERT_TRUE(c.requires_grad());
  c.sum().backward();
  EXPECT_TRUE(testing::tensors_close((x * y).cos().detach() * y * y, x.grad()));
}

// as_strided reads its argument's storage offset: a tensor placed past the arena's start would be
// read from the wrong bytes, so what such an op reads stays out of the arena.
TEST(PlannedInterpreter, MemoryAnOpReadsByStorageOffsetStaysOutOfTheArena) {
  Graph g = parse_graph(R"(
graph offsets(%x: f32[64], %y: f32[8]):
  %big: f32[64] = aten::sin(%x)
  %a: f32[8] = aten::cos(%y)
  %v: f32[4] stride=[2] = aten::as_strided(%a, [4], [2], 0)
  %b: f32[4] = aten::mul.Scalar(%v, 3)
  %s: f32[64] = aten::mul.Tensor(%big, %big)
  return (%b, %s)
)");
  verify(g);
  const Interpreter interp = planned(g);
  EXPECT_EQ(interp.num_planned_calls(), 1u) << "only %big: %a is read through as_strided";
  const at::Tensor x = at::randn({64}), y = at::randn({8});
  EXPECT_TRUE(testing::tensor_lists_close(Interpreter(g).run({x, y}), interp.run({x, y}), 0, 0));
}

// An op whose out= kernel refuses what its functional kernel takes.
TORCH_LIBRARY_FRAGMENT(aotpipe_planned_test, m) {
  m.def("twice(Tensor x) -> Tensor");
  m.def("twice.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)");
  m.impl("twice", c10::DispatchKey::CPU, [](const at::Tensor& x) { return x * 2; });
  m.impl("twice.out", c10::DispatchKey::CPU, [](const at::Tensor&, at::Tensor& out) -> at::Tensor& {
    throw std::runtime_error("twice.out takes nothing");
    return out;
  });
}

// Three planned runs of a graph computing `op`(x).exp() + 1, where `op` computes x * `factor` and
// both it and exp write into the arena: what the counters grew by over them.
InterpreterCounters three_runs_of(const std::string& op, double factor) {
  Graph g = parse_graph(R"(
graph three_runs(%x: f32[4]):
  %a: f32[4] = )" + op + R"((%x)
  %b: f32[4] = aten::exp(%a)
  %c: f32[4] = aten::add.Scalar(%b, 1)
  return (%c)
)");
  verify(g);
  const Interpreter interp = planned(g);
  EXPECT_EQ(interp.num_planned_calls(), 2u) << op << " and exp";
  const at::Tensor x = at::randn({4});
  const InterpreterCounters before = interpreter_counters();
  for (int run = 0; run < 3; ++run)
    EXPECT_TRUE(testing::tensors_close((x * factor).exp() + 1, interp.run({x})[0], 0, 0));
  const InterpreterCounters after = interpreter_counters();
  return {.planned_runs = after.planned_runs - before.planned_runs,
          .unplanned_runs = after.unplanned_runs - before.unplanned_runs,
          .out_calls_refused = after.out_calls_refused - before.out_calls_refused,
          .folded_calls = after.folded_calls - before.folded_calls,
          .out_calls_out_of_memory = after.out_calls_out_of_memory - before.out_calls_out_of_memory};
}

TEST(PlannedInterpreter, AnOutKernelThatRefusesLeavesItsCallToTheFunctionalOp) {
  const InterpreterCounters grew = three_runs_of("aotpipe_planned_test::twice", 2);
  EXPECT_EQ(grew.out_calls_refused, 1u) << "asked once, then remembered";
  EXPECT_EQ(grew.planned_runs, 3u) << "exp still writes into the arena";
}

// An op whose out= kernel finds no memory for its workspace at its first call only, and one whose
// functional kernel never finds any.
std::atomic<int> short_out_calls{0};
TORCH_LIBRARY_FRAGMENT(aotpipe_planned_test, m) {
  m.def("short_once(Tensor x) -> Tensor");
  m.def("short_once.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)");
  m.impl("short_once", c10::DispatchKey::CPU, [](const at::Tensor& x) { return x * 3; });
  m.impl("short_once.out", c10::DispatchKey::CPU, [](const at::Tensor& x, at::Tensor& out) -> at::Tensor& {
    TORCH_CHECK_WITH(OutOfMemoryError, short_out_calls.fetch_add(1) > 0, "short_once.out: no memory for a workspace");
    return at::mul_out(out, x, 3);
  });
  m.def("never_memory(Tensor x) -> Tensor");
  m.impl("never_memory", c10::DispatchKey::CPU, [](const at::Tensor& x) -> at::Tensor {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "never_memory: tried to allocate ", x.nbytes(), " bytes");
  });
}

// Out of memory is a lack of the moment, not a refusal: the call runs its functional op that run,
// and the next run writes into the arena again.
TEST(PlannedInterpreter, AnOutKernelOutOfMemoryFallsBackForThatRunOnly) {
  short_out_calls = 0;
  const InterpreterCounters grew = three_runs_of("aotpipe_planned_test::short_once", 3);
  EXPECT_EQ(short_out_calls, 3) << "the out kernel is asked at every run";
  EXPECT_EQ(grew.out_calls_out_of_memory, 1u);
  EXPECT_EQ(grew.out_calls_refused, 0u) << "not remembered as a refusal";
  EXPECT_EQ(grew.planned_runs, 3u);
}

// A kernel out of memory raises c10::OutOfMemoryError as eager does (a caller may catch it to free
// memory or shrink its batch), with the graph and the call named; planned or not.
TEST(PlannedInterpreter, OutOfMemoryKeepsItsTypeAndNamesTheCall) {
  Graph g = parse_graph(R"(
graph hungry(%x: f32[4]):
  %a: f32[4] = aten::sin(%x)
  %b: f32[4] = aotpipe_planned_test::never_memory(%a)
  return (%b)
)");
  verify(g);
  for (const Interpreter& interp : {Interpreter(g), planned(g)}) {
    try {
      (void)interp.run({at::randn({4})});
      ADD_FAILURE() << "ran without memory";
    } catch (const c10::OutOfMemoryError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("never_memory: tried to allocate 16 bytes"), std::string::npos) << what;
      EXPECT_NE(what.find("interpreter: graph 'hungry': %b = aotpipe_planned_test::never_memory failed"),
                std::string::npos)
          << what;
    }
  }
}

// nn.GRU's cell as torch.export writes it: the gates are unsafe_splits of one addmm, read after
// the splits. The plan must keep the addmm's bytes until the last gate is read.
TEST(PlannedInterpreter, UnsafeSplitGatesReadTheirBaseToTheEnd) {
  Graph g = parse_graph(R"(
graph gru_cell(%x: f32[2, 4], %h: f32[2, 3], %w: f32[9, 4], %u: f32[9, 3], %b: f32[9]):
  %t: f32[4, 9] stride=[1, 4] = aten::t(%w)
  %gx: f32[2, 9] = aten::addmm(%b, %x, %t)
  %x0: f32[2, 3] stride=[9, 1], %x1: f32[2, 3] stride=[9, 1] offset=3, %x2: f32[2, 3] stride=[9, 1] offset=6 = aten::unsafe_split.Tensor(%gx, 3, 1)
  %tu: f32[3, 9] stride=[1, 3] = aten::t(%u)
  %gh: f32[2, 9] = aten::mm(%h, %tu)
  %h0: f32[2, 3] stride=[9, 1], %h1: f32[2, 3] stride=[9, 1] offset=3, %h2: f32[2, 3] stride=[9, 1] offset=6 = aten::unsafe_split.Tensor(%gh, 3, 1)
  %r0: f32[2, 3] = aten::add.Tensor(%h0, %x0)
  %r: f32[2, 3] = aten::sigmoid(%r0)
  %z0: f32[2, 3] = aten::add.Tensor(%h1, %x1)
  %z: f32[2, 3] = aten::sigmoid(%z0)
  %m: f32[2, 3] = aten::mul.Tensor(%h2, %r)
  %n0: f32[2, 3] = aten::add.Tensor(%x2, %m)
  %n: f32[2, 3] = aten::tanh(%n0)
  %d: f32[2, 3] = aten::sub.Tensor(%h, %n)
  %e: f32[2, 3] = aten::mul.Tensor(%d, %z)
  %y: f32[2, 3] = aten::add.Tensor(%e, %n)
  return (%y)
)");
  verify(g);
  const Interpreter interp = planned(g);
  ASSERT_GT(interp.num_planned_calls(), 0u);
  const std::vector<at::Tensor> inputs{at::randn({2, 4}), at::randn({2, 3}), at::randn({9, 4}), at::randn({9, 3}),
                                       at::randn({9})};
  const auto expected = Interpreter(g).run(inputs);
  for (int run = 0; run < 2; ++run) EXPECT_TRUE(testing::tensor_lists_close(expected, interp.run(inputs), 0, 0));
}

// An op whose schema calls its result fresh and whose kernel returns a view of its argument, as
// unsafe_split's does, but which no list names: the planned run fails, naming it, instead of
// letting the plan reuse bytes the view still reads.
TORCH_LIBRARY_FRAGMENT(aotpipe_planned_test, m) {
  m.def("secret_view(Tensor x) -> Tensor");
  m.impl("secret_view", c10::DispatchKey::CPU, [](const at::Tensor& x) { return x.view(-1); });
}

TEST(PlannedInterpreter, AResultThatHidesAViewOfTheArenaIsAnError) {
  Graph g = parse_graph(R"(
graph lying(%x: f32[4, 4]):
  %a: f32[4, 4] = aten::sin(%x)
  %v: f32[16] = aotpipe_planned_test::secret_view(%a)
  %b: f32[4, 4] = aten::cos(%x)
  %c: f32[16] = aten::mul.Scalar(%v, 2)
  return (%c, %b)
)");
  verify(g);
  const Interpreter interp = planned(g);
  ASSERT_EQ(interp.num_planned_calls(), 1u) << "only %a: the plan believes %v is fresh";
  try {
    (void)interp.run({at::randn({4, 4})});
    ADD_FAILURE() << "ran on a plan that the kernel's hidden view breaks";
  } catch (const GraphError& e) {
    EXPECT_NE(
        std::string(e.what()).find("output 0 of %v = aotpipe_planned_test::secret_view is a view of planned memory"),
        std::string::npos)
        << e.what();
  }
  // Unplanned, nothing depends on the schema: the same graph runs.
  const at::Tensor x = at::randn({4, 4});
  EXPECT_TRUE(testing::tensors_close(x.sin().view(-1) * 2, Interpreter(g).run({x})[0]));
}

// Random graphs (views, multi-output and list ops, in-place-able pointwise chains): the planned
// interpreter's outputs equal the plain one's bit for bit, on a fresh arena and on a reused one,
// and outputs of one run survive the next.
TEST(PlannedInterpreter, RandomGraphsGiveThePlainInterpretersResults) {
  std::size_t with_plan = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const Graph g = testing::random_graph(seed, 40);
    const Interpreter interp = planned(g);
    if (interp.num_planned_calls() > 0) ++with_plan;
    const auto inputs = testing::make_inputs(g, seed);
    at::manual_seed(static_cast<int64_t>(seed));
    const auto expected = Interpreter(g).run(inputs);
    at::manual_seed(static_cast<int64_t>(seed));
    const auto first = interp.run(inputs);
    std::vector<at::Tensor> kept;
    for (const at::Tensor& t : first) kept.push_back(t.clone());
    at::manual_seed(static_cast<int64_t>(seed) + 1);
    (void)interp.run(testing::make_inputs(g, seed + 1));
    at::manual_seed(static_cast<int64_t>(seed));
    const auto again = interp.run(inputs);
    ASSERT_EQ(first.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(testing::tensors_close(expected[i], first[i], 0, 0)) << "seed " << seed << " output " << i;
      EXPECT_TRUE(testing::tensors_close(kept[i], first[i], 0, 0))
          << "seed " << seed << " output " << i << " changed in the next run";
      EXPECT_TRUE(testing::tensors_close(expected[i], again[i], 0, 0)) << "seed " << seed << " output " << i;
    }
  }
  EXPECT_GT(with_plan, 200u) << "the generator makes graphs with planned calls";
}

// Threads share the program (and the flag of the refusing out kernel); each has its own arena.
TEST(PlannedInterpreter, ConcurrentRunsOfOneInterpreter) {
  Graph g = parse_graph(R"(
graph par(%x: f32[64, 64]):
  %t: f32[64, 64] = aotpipe_planned_test::twice(%x)
  %a: f32[64, 64] = aten::mm(%t, %x)
  %b: f32[64, 64] = aten::tanh(%a)
  %c: f32[64, 64] = aten::mm(%b, %x)
  %d: f32[64, 64] = aten::sigmoid(%c)
  return (%d)
)");
  const Interpreter interp = planned(g);
  ASSERT_EQ(interp.num_planned_calls(), 4u);
  testing::expect_concurrent_runs_match(
      interp, [](const at::Tensor& x) { return at::mm(at::mm(x * 2, x).tanh(), x).sigmoid(); }, 64);
}

}  // namespace
}  // namespace aotpipe
