// graph/block_cache.h: freed blocks of a class's size come back to the thread that freed them,
// other sizes and sanitizer builds pass through to the global allocator, a thread's cache is
// bounded, and blocks may be freed on another thread than the one that made them.
// graph/array_cache.h (the name index's arrays): the same, by array size.
#include <aotpipe/graph/array_cache.h>
#include <aotpipe/graph/block_cache.h>
#include <aotpipe/graph/tensor_meta.h>

#include <boost/unordered/unordered_flat_map.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace aotpipe {
namespace {

struct Widget : BlockAllocated<Widget, 8> {
  explicit Widget(int v) : value(v) {}
  virtual ~Widget() = default;
  int value;
  char payload[200] = {};  // beyond glibc's fast bins, as graph nodes and values are
};

struct BigWidget final : Widget {
  using Widget::Widget;
  char more[64] = {};
};

TEST(BlockCache, FreedBlocksAreReusedByTheSameThread) {
  if (!AOTPIPE_BLOCK_CACHE_ENABLED) GTEST_SKIP() << "sanitizer build: the cache is bypassed by design";
  auto* a = new Widget(1);
  void* block = a;
  delete a;
  auto* b = new Widget(2);
  EXPECT_EQ(static_cast<void*>(b), block) << "the block just freed is handed out first";
  EXPECT_EQ(b->value, 2);
  delete b;
}

TEST(BlockCache, OtherSizesPassThrough) {
  // A derived class of another size is neither served from nor kept in the cache.
  std::vector<std::unique_ptr<Widget>> small;
  for (int i = 0; i < 4; ++i) small.push_back(std::make_unique<Widget>(i));
  std::set<void*> cached;
  for (auto& w : small) cached.insert(w.get());
  small.clear();  // four blocks of sizeof(Widget) now cached
  std::unique_ptr<Widget> big(new BigWidget(7));
  EXPECT_FALSE(cached.count(big.get())) << "a BigWidget got a Widget-sized block";
  EXPECT_EQ(big->value, 7);
}

TEST(BlockCache, KeepsAtMostItsBoundAndEveryBlockStaysUsable) {
  // 100 live at once, then all freed: at most 8 are kept; the rest go back to the allocator.
  std::vector<std::unique_ptr<Widget>> many;
  for (int i = 0; i < 100; ++i) many.push_back(std::make_unique<Widget>(i));
  std::set<void*> freed;
  for (auto& w : many) freed.insert(w.get());
  many.clear();
  std::vector<std::unique_ptr<Widget>> again;
  std::size_t reused = 0;
  for (int i = 0; i < 100; ++i) {
    again.push_back(std::make_unique<Widget>(i));
    reused += freed.count(again.back().get());
    EXPECT_EQ(again.back()->value, i);
  }
  if (AOTPIPE_BLOCK_CACHE_ENABLED) EXPECT_GE(reused, 8u);
}

TEST(BlockCache, BlocksFreedOnAnotherThreadAndThreadsThatExit) {
  // Made here, freed there (joining that thread's cache, released when it exits), and the
  // other way round; run under AddressSanitizer and ThreadSanitizer builds alike.
  for (int round = 0; round < 4; ++round) {
    std::vector<Widget*> made_here;
    for (int i = 0; i < 50; ++i) made_here.push_back(new Widget(i));
    std::vector<Widget*> made_there;
    std::thread worker([&] {
      for (Widget* w : made_here) delete w;
      for (int i = 0; i < 50; ++i) made_there.push_back(new Widget(i));
    });
    worker.join();
    int sum = 0;
    for (Widget* w : made_there) sum += w->value, delete w;
    EXPECT_EQ(sum, 49 * 50 / 2);
  }
}

TEST(ArrayCache, FreedArraysComeBackBySize) {
  if (!AOTPIPE_BLOCK_CACHE_ENABLED) GTEST_SKIP() << "sanitizer build: the cache is bypassed by design";
  void* a = ArrayCache::allocate(3000);
  ArrayCache::deallocate(a, 3000);
  void* b = ArrayCache::allocate(3000);
  EXPECT_EQ(b, a) << "the array just freed is handed out again for the same size";
  void* c = ArrayCache::allocate(3000);  // none of that size left: a new one
  EXPECT_NE(c, b);
  ArrayCache::deallocate(b, 3000);
  ArrayCache::deallocate(c, 3000);  // both kept now
  void* d = ArrayCache::allocate(5000);
  EXPECT_NE(d, b) << "an array of another size was handed out";
  EXPECT_NE(d, c) << "an array of another size was handed out";
  ArrayCache::deallocate(d, 5000);
  ArrayCache::deallocate(ArrayCache::allocate(3000), 3000);
}

TEST(ArrayCache, TablesGrowAndDieOnAnyThread) {
  // What the name index does: a table grows (each step frees the smaller array), is read, and is
  // destroyed, here and on other threads; every entry reads back, under sanitizer builds too.
  using Table = boost::unordered_flat_map<int, int, boost::hash<int>, std::equal_to<>,
                                          RecyclingAllocator<std::pair<const int, int>>>;
  for (int round = 0; round < 3; ++round) {
    auto table = std::make_unique<Table>();
    for (int i = 0; i < 5000; ++i) table->emplace(i, 2 * i);
    std::thread other([&] {
      Table copy = *table;  // arrays of the other thread's cache
      table.reset();        // this thread's arrays, freed there
      long sum = 0;
      for (const auto& [k, v] : copy) sum += v - 2 * k;
      EXPECT_EQ(sum, 0);
      EXPECT_EQ(copy.size(), 5000u);
    });
    other.join();
    Table again;
    for (int i = 0; i < 5000; ++i) again.emplace(i, i);
    EXPECT_EQ(again.at(4999), 4999);
  }
}

TEST(Dims, ConvertsFromAndToVectorsAndCompares) {
  const std::vector<int64_t> v{2, 3, 4, 5, 6, 7, 8};  // more than held in place
  Dims d = v;
  EXPECT_EQ(d.size(), 7u);
  EXPECT_EQ(d, v);
  std::vector<int64_t> back = d;
  EXPECT_EQ(back, v);
  c10::IntArrayRef ref = d;
  EXPECT_EQ(ref.vec(), v);
  TensorMeta meta = TensorMeta::contiguous({2, 3});
  EXPECT_EQ(meta.strides, (std::vector<int64_t>{3, 1}));
  meta.sizes = v;
  EXPECT_NE(meta.sizes, (Dims{2, 3}));
  EXPECT_EQ(contiguous_strides(Dims{4, 1, 2}), (Dims{2, 2, 1}));
}

}  // namespace
}  // namespace aotpipe
