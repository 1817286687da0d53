// The model's GEMMs under each BLAS this machine has: OpenBLAS (what sparq
// links), BLIS, oneDNN and libxsmm, one thread each (sparq splits large
// calls over its own threads, blas.cc), interleaved round by round so the
// ratios come from the same moments of a shared machine.
//
// Shapes: every product of a training step of sparq train's default DLRM
// (bottom 13-512-256-64-16, top 367-512-256-1): forward Y = X W^T, weight
// gradient dW = dZ^T X, input gradient dX = dZ W (none for the first
// layer), at each batch size asked for.
//
// BLIS and oneDNN are opened at run time (dlopen, local symbols) so their
// BLAS symbols cannot stand in for OpenBLAS's, and so their OpenMP thread
// count can be set before they load; a library that is not installed is
// reported and skipped. libxsmm is a static library in Debian and is linked
// when the build found it (SPARQ_HAVE_LIBXSMM). None of them is a
// dependency of sparq: they are measuring sticks (sudo apt-get install
// libblis-dev libdnnl-dev libxsmm-dev).
//
//   build/bench/model/bench_gemm_libraries [--batches 128,1024,4096,16384] [--rounds 5]
//
// Output: a Markdown table, ms per call (median over rounds, on the thread's
// CPU time), OpenBLAS's GFLOP/s, and each library's time over OpenBLAS's.
#include <cblas.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#ifdef SPARQ_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

namespace {

// Row-major C[m x n] = op(A) op(B) (+ beta C), as sparq::gemm takes it.
struct Shape {
  std::string name;
  bool ta, tb;
  int m, n, k;
};
using Gemm = std::function<void(const Shape&, const float* a, const float* b, float* c)>;
struct Library {
  std::string name;
  Gemm run;
};

int lda_of(const Shape& s) { return s.ta ? s.m : s.k; }
int ldb_of(const Shape& s) { return s.tb ? s.k : s.n; }

std::vector<Shape> step_shapes(int batch) {
  const std::vector<std::pair<std::string, std::vector<int>>> mlps = {{"bot", {13, 512, 256, 64, 16}},
                                                                      {"top", {367, 512, 256, 1}}};
  std::vector<Shape> shapes;
  for (const auto& [mlp, w] : mlps)
    for (std::size_t l = 0; l + 1 < w.size(); ++l) {
      const int in = w[l], out = w[l + 1];
      const std::string layer = fmt::format("{}{} {}x{}", mlp, l, in, out);
      shapes.push_back({layer + " fwd", false, true, batch, out, in});
      shapes.push_back({layer + " dW", true, false, out, in, batch});
      if (!(mlp == "bot" && l == 0)) shapes.push_back({layer + " dX", false, false, batch, in, out});
    }
  return shapes;
}

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void* open_local(const char* lib) { return dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND); }

std::vector<Library> libraries() {
  std::vector<Library> libs;
  openblas_set_num_threads(1);
  libs.push_back({fmt::format("OpenBLAS {}", openblas_get_corename()), [](const Shape& s, const float* a,
                                                                            const float* b, float* c) {
                    cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                                s.m, s.n, s.k, 1.f, a, lda_of(s), b, ldb_of(s), 0.f, c, s.n);
                  }});

  using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                              float*, int);
  if (void* blis = open_local("libblis.so.4")) {
    reinterpret_cast<void (*)(long)>(dlsym(blis, "bli_thread_set_num_threads"))(1);
    const char* arch = reinterpret_cast<const char* (*)(int)>(dlsym(blis, "bli_arch_string"))(
        reinterpret_cast<int (*)()>(dlsym(blis, "bli_arch_query_id"))());
    auto* sgemm = reinterpret_cast<CblasSgemm>(dlsym(blis, "cblas_sgemm"));
    libs.push_back({fmt::format("BLIS {}", arch), [sgemm](const Shape& s, const float* a, const float* b, float* c) {
                      sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.m,
                            s.n, s.k, 1.f, a, lda_of(s), b, ldb_of(s), 0.f, c, s.n);
                    }});
  } else {
    std::fprintf(stderr, "BLIS: not installed (%s)\n", dlerror());
  }

  using DnnlSgemm = int (*)(char, char, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                            const float*, std::int64_t, float, float*, std::int64_t);
  if (void* dnnl = open_local("libdnnl.so.2")) {
    auto* sgemm = reinterpret_cast<DnnlSgemm>(dlsym(dnnl, "dnnl_sgemm"));
    const int isa = reinterpret_cast<int (*)()>(dlsym(dnnl, "dnnl_get_effective_cpu_isa"))();
    libs.push_back({fmt::format("oneDNN isa {:#x}", isa), [sgemm](const Shape& s, const float* a, const float* b,
                                                                  float* c) {
                      if (sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.f, a, lda_of(s), b, ldb_of(s),
                                0.f, c, s.n) != 0)
                        std::abort();
                    }});
  } else {
    std::fprintf(stderr, "oneDNN: not installed (%s)\n", dlerror());
  }

#ifdef SPARQ_HAVE_LIBXSMM
  libxsmm_init();
  // Column-major: C^T [n x m] = op(B)^T op(A)^T. libxsmm JITs a kernel for
  // small products and hands the others to the BLAS it is linked with.
  libs.push_back({fmt::format("libxsmm {}", libxsmm_get_target_arch()), [](const Shape& s, const float* a,
                                                                             const float* b, float* c) {
                    const char ta = s.tb ? 'T' : 'N', tb = s.ta ? 'T' : 'N';
                    const libxsmm_blasint m = s.n, n = s.m, k = s.k, lda = ldb_of(s), ldb = lda_of(s), ldc = s.n;
                    const float alpha = 1.f, beta = 0.f;
                    libxsmm_sgemm(&ta, &tb, &m, &n, &k, &alpha, b, &lda, a, &ldb, &beta, c, &ldc);
                  }});
#else
  std::fprintf(stderr, "libxsmm: not built in (libxsmm-dev was not found when this was configured)\n");
#endif
  return libs;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int> parse_ints(const char* list) {
  std::vector<int> v;
  for (const char* p = list; *p;) {
    char* end = nullptr;
    const long x = std::strtol(p, &end, 10);
    if (end == p || x <= 0) {
      std::fprintf(stderr, "bad --batches list: %s\n", list);
      std::exit(2);
    }
    v.push_back(static_cast<int>(x));
    p = *end == ',' ? end + 1 : end;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any OpenMP runtime loads with BLIS or oneDNN: the split over
  // threads is sparq's, so each library gets one.
  setenv("OMP_NUM_THREADS", "1", 1);
  setenv("BLIS_NUM_THREADS", "1", 1);
  std::vector<int> batches = {128, 1024, 4096, 16384};
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--batches" && i + 1 < argc) {
      batches = parse_ints(argv[++i]);
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--batches 128,1024,...] [--rounds N]\n", argv[0]);
      return 2;
    }
  }
  const std::vector<Library> libs = libraries();

  fmt::print("| batch | product | m x n x k | OpenBLAS GFLOP/s |");
  for (const Library& l : libs) fmt::print(" {} ms |", l.name);
  for (std::size_t j = 1; j < libs.size(); ++j)
    fmt::print(" {} / OpenBLAS |", libs[j].name.substr(0, libs[j].name.find(' ')));
  fmt::print("\n|---|---|---|---|");
  for (std::size_t j = 0; j + 1 < 2 * libs.size(); ++j) fmt::print("---|");
  fmt::print("\n");

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (const int batch : batches) {
    const std::vector<Shape> shapes = step_shapes(batch);
    // times[shape][lib][round], seconds per call
    std::vector<std::vector<std::vector<double>>> times(shapes.size(), std::vector<std::vector<double>>(libs.size()));
    std::vector<double> reference;
    for (std::size_t si = 0; si < shapes.size(); ++si) {
      const Shape& s = shapes[si];
      std::vector<float> a(static_cast<std::size_t>(s.m) * s.k), b(static_cast<std::size_t>(s.k) * s.n),
          c(static_cast<std::size_t>(s.m) * s.n);
      for (float& x : a) x = dist(rng);
      for (float& x : b) x = dist(rng);
      // Each library once, checked against OpenBLAS's result, then enough
      // repetitions for ~20 ms a timing.
      std::vector<float> want;
      std::vector<int> reps(libs.size());
      for (std::size_t li = 0; li < libs.size(); ++li) {
        std::fill(c.begin(), c.end(), std::nanf(""));
        libs[li].run(s, a.data(), b.data(), c.data());
        if (li == 0) want = c;
        double worst = 0;
        for (std::size_t i = 0; i < c.size(); ++i) worst = std::max(worst, double(std::fabs(c[i] - want[i])));
        if (!(worst <= 1e-4 * s.k)) {
          std::fprintf(stderr, "%s disagrees with OpenBLAS on %s (max |diff| %g)\n", libs[li].name.c_str(),
                       s.name.c_str(), worst);
          return 1;
        }
        const double t0 = thread_seconds();
        libs[li].run(s, a.data(), b.data(), c.data());
        reps[li] = std::clamp(static_cast<int>(0.02 / std::max(thread_seconds() - t0, 1e-7)), 1, 100000);
      }
      for (int r = 0; r < rounds; ++r)
        for (std::size_t li = 0; li < libs.size(); ++li) {
          const double t0 = thread_seconds();
          for (int i = 0; i < reps[li]; ++i) libs[li].run(s, a.data(), b.data(), c.data());
          times[si][li].push_back((thread_seconds() - t0) / reps[li]);
        }
    }
    std::vector<double> total(libs.size(), 0);
    for (std::size_t si = 0; si < shapes.size(); ++si) {
      const Shape& s = shapes[si];
      std::vector<double> ms;
      for (std::size_t li = 0; li < libs.size(); ++li) ms.push_back(1e3 * median(times[si][li]));
      fmt::print("| {} | {} | {}x{}x{} | {:.1f} |", batch, s.name, s.m, s.n, s.k, 2e-6 * s.m * s.n * s.k / ms[0]);
      for (std::size_t li = 0; li < libs.size(); ++li) {
        total[li] += ms[li];
        fmt::print(" {:.4f} |", ms[li]);
      }
      for (std::size_t li = 1; li < libs.size(); ++li) fmt::print(" {:.2f} |", ms[li] / ms[0]);
      fmt::print("\n");
    }
    double flop = 0;
    for (const Shape& s : shapes) flop += 2.0 * s.m * s.n * s.k;
    fmt::print("| {} | **step** | | {:.1f} |", batch, 1e-6 * flop / total[0]);
    for (double t : total) fmt::print(" **{:.3f}** |", t);
    for (std::size_t li = 1; li < libs.size(); ++li) fmt::print(" **{:.2f}** |", total[li] / total[0]);
    fmt::print("\n");
  }
}
