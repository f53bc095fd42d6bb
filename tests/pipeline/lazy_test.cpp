// Lazy<T> (pipeline/lazy.h): made once on first use however many threads ask at once, shared by
// copies, and tried again after a make that threw.
#include <aotpipe/pipeline/lazy.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace aotpipe {
namespace {

TEST(Lazy, MadeOnceOnFirstUseAndSharedByCopies) {
  int makes = 0;
  const Lazy<std::string> lazy = Lazy<std::string>::deferred([&makes] {
    ++makes;
    return std::string("value");
  });
  const Lazy<std::string> copy = lazy;
  EXPECT_FALSE(lazy.is_made());
  EXPECT_EQ(makes, 0);
  EXPECT_EQ(copy.get(), "value");
  EXPECT_TRUE(lazy.is_made());
  EXPECT_EQ(&lazy.get(), &copy.get());
  EXPECT_EQ(makes, 1);
}

TEST(Lazy, ConcurrentFirstUsesMakeItOnce) {
  constexpr int kThreads = 16;
  std::atomic<int> makes{0};
  const Lazy<int> lazy = Lazy<int>::deferred([&makes] {
    makes.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the others arrive while it makes
    return 42;
  });
  std::latch start(kThreads);  // every thread asks at once
  std::vector<std::thread> threads;
  std::atomic<int> sum{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      start.arrive_and_wait();
      sum.fetch_add(lazy.get());
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(makes.load(), 1);
  EXPECT_EQ(sum.load(), kThreads * 42);
}

TEST(Lazy, AMakeThatThrowsIsTriedAgain) {
  int attempts = 0;
  const Lazy<int> lazy = Lazy<int>::deferred([&attempts] {
    if (++attempts == 1) throw std::runtime_error("first try fails");
    return 7;
  });
  EXPECT_THROW((void)lazy.get(), std::runtime_error);
  EXPECT_FALSE(lazy.is_made());
  EXPECT_EQ(lazy.get(), 7);
  EXPECT_EQ(attempts, 2);
}

TEST(Lazy, MadeHoldsItsValueAndEmptyRefusesUse) {
  EXPECT_EQ(Lazy<int>::made(3).get(), 3);
  EXPECT_TRUE(Lazy<int>::made(3).is_made());
  EXPECT_THROW((void)Lazy<int>{}.get(), std::logic_error);
}

}  // namespace
}  // namespace aotpipe
