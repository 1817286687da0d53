#pragma once
// Dense kernels charged by their shape on the virtual clock (sparq train
// --kernel-costs). The clock charges a thread the CPU time it used; on a
// shared machine the same GEMM's CPU time moves with the neighbours' load
// (caches, memory bandwidth, a burst lasting a whole run), so identical runs
// model different steps, and a planner comparing plans a few percent apart
// ranks the machine's load. A kernel whose work is set by its shape alone (a
// GEMM block, the interaction, an MLP's bias and activation) costs instead
// what that shape cost here: the median of its first kSamples calls in this
// process (each thread's first call of a shape left out: page faults, code
// generation), fixed from then on and, with a file, across processes. Work
// whose size the data sets (the embedding rows a batch touches, summed,
// exchanged and updated) is charged by its count instead: the median cost
// per unit (a value) of its first samples, times the call's units, kept
// apart for calls of each size class (units within 2x of each other), so a
// tiny call's fixed overhead is not charged per value of a large one; which
// rows, and so how the caches serve them, is left out of the charge. The
// codecs (sparq/coll/codec.cc, DCT-DP, DCT-MP) are charged by their values
// too; the remaining data-dependent work stays charged as measured.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace sparq {

class KernelCosts {
 public:
  static constexpr std::size_t kSamples = 64;
  // What the clock charges for one call of `kernel` on `shape` and `units`
  // units of work that took `measured` CPU seconds: `units` times the
  // shape's fixed cost per unit, or `measured` while it is sampled (then
  // this call is a sample if `sample` and units > 0). A kernel charged by
  // shape alone has one unit a call.
  double charge(std::string_view kernel, const std::size_t (&shape)[5], double measured, bool sample,
                std::size_t units = 1);
  // Reads fixed costs from `path` (none if it does not exist); throws
  // InputError naming the file and line on anything malformed, and where
  // the costs were measured on another CPU.
  void load(const std::string& path);
  // Writes every fixed cost to `path`.
  void save(const std::string& path) const;
  // Shapes with a fixed cost.
  std::size_t fixed() const;
  // Fixes anew each cost this process measured (not one read from a file)
  // that has had kSamples calls or more since: the median of those calls
  // (an even sample of them), per unit. A cost fixed by its first calls is
  // one moment's: in a search the kernels of one family of plans are first
  // called seconds after another's, and a burst of the machine's load at
  // either moment set the order of plans a few per cent apart for the
  // whole search. Calls spread over a whole pass of it do not hang on one
  // moment. Returns how many costs it fixed anew.
  std::size_t refit();

 private:
  static constexpr std::size_t kPool = 1024;  // calls kept a shape for refit()
  struct Entry {
    double cost = -1;  // < 0: still sampled
    std::vector<double> samples;
    std::string label;
    bool kept = false;          // read from a file: fixed for good
    std::vector<double> later;  // calls since the cost was fixed, each stride-th
    std::size_t calls = 0, stride = 1;
  };
  static void keep_later(Entry& e, double per_unit);
  mutable std::mutex mu_;
  std::map<std::uint64_t, Entry> entries_;
};

// The count of a call's work, for a kernel charged by its units.
struct Units {
  std::size_t n;
};

// One call of a kernel of the given shape (up to five numbers), timed and
// charged by KernelCosts when the calling thread's clock has them
// (EmulatedThreads::costs); nothing otherwise. Nested calls are charged by
// the outermost. With Units, a cost per unit of the shape: four numbers
// for what a unit's cost depends on (a row's width, the element type), the
// fifth the call's size class, std::bit_width(units).
class ChargedKernel {
 public:
  ChargedKernel(const char* kernel, std::size_t a, std::size_t b = 0, std::size_t c = 0, std::size_t d = 0,
                std::size_t e = 0);
  ChargedKernel(const char* kernel, Units units, std::size_t a = 0, std::size_t b = 0, std::size_t c = 0,
                std::size_t d = 0);
  ~ChargedKernel();
  ChargedKernel(const ChargedKernel&) = delete;
  ChargedKernel& operator=(const ChargedKernel&) = delete;

 private:
  void start();

  KernelCosts* costs_ = nullptr;
  const char* kernel_;
  std::size_t shape_[5];
  std::size_t units_;
  double start_ = 0;
};

// The calling thread's CPU time as the clock charges it: its CPU time, with
// each charged kernel's measured time replaced by its cost.
double charged_cpu_seconds();

}  // namespace sparq
