#include "sparq/data/npz.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "sparq/core/error.h"
#include "sparq/data/criteo_npz.h"
#include "sparq/data/dataset.h"
#include "sparq/core/rng.h"
#include "tests/data/temp_dir.h"

namespace sparq {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

template <class T>
std::vector<T> values(const NpyArray& a) {
  std::vector<T> v(a.count());
  for (std::uint64_t i = 0; i < a.count(); ++i) v[i] = static_cast<T>(a.real_at(i));
  return v;
}

TEST(Npz, WriterReaderRoundTrip) {
  test::TempDir d;
  const auto p = (d.path / "a.npz").string();
  const std::vector<float> f{1.5f, -2.f, 3.25f, 0.f, 1e-8f, 7.f};
  const std::vector<std::int32_t> i32{-1, 2, 2147483647};
  const std::vector<std::int64_t> i64{-5000000000LL};
  {
    NpzWriter w(p);
    w.add("f", {2, 3}, std::span(f));
    w.add("i", {3}, std::span(i32));
    w.add("s", {}, std::span(i64));
    w.add("empty", {0, 4}, std::span<const float>());
    w.finish();
  }
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
  EXPECT_TRUE(is_zip(p));
  const auto m = read_npz(p);
  ASSERT_EQ(m.size(), 4u);
  const NpyArray& a = m.at("f");
  EXPECT_EQ(a.type(), NpyType::F32);
  EXPECT_EQ(a.shape(), (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(values<float>(a), f);
  EXPECT_EQ(m.at("i").type(), NpyType::I32);
  EXPECT_EQ(values<std::int32_t>(m.at("i")), i32);
  EXPECT_EQ(m.at("s").shape().size(), 0u);
  EXPECT_EQ(m.at("s").int_at(0), -5000000000LL);
  EXPECT_EQ(m.at("empty").count(), 0u);
}

TEST(Npz, UnfinishedWriterLeavesNoFile) {
  test::TempDir d;
  const auto p = (d.path / "a.npz").string();
  {
    NpzWriter w(p);
    const std::vector<float> f(10);
    w.add("f", {10}, std::span(f));
  }
  EXPECT_FALSE(std::filesystem::exists(p));
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
}

// Every truncation and many corruptions of a valid file: an InputError or a
// successful read (a flipped byte in padding), never a crash or another error.
TEST(Npz, DamagedFilesAreInputErrors) {
  test::TempDir d;
  const auto p = (d.path / "a.npz").string();
  {
    NpzWriter w(p);
    const std::vector<float> f(40, 1.f);
    const std::vector<std::int32_t> i(7, 3);
    w.add("X", {10, 4}, std::span(f));
    w.add("y", {7}, std::span(i));
    w.finish();
  }
  const std::string good = slurp(p);
  const auto q = (d.path / "bad.npz").string();
  auto check = [&](const std::string& bytes) {
    std::ofstream(q, std::ios::binary | std::ios::trunc) << bytes;
    try {
      read_npz(q);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.npz"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  for (std::size_t n = 0; n < good.size(); ++n) check(good.substr(0, n));
  Rng rng(1, 2);
  for (int k = 0; k < 3000; ++k) {
    std::string b = good;
    b[rng.below(b.size())] = static_cast<char>(rng.below(256));
    check(b);
  }
  // A flipped data byte is caught by the CRC.
  std::string b = good;
  b[200] ^= 1;
  std::ofstream(q, std::ios::binary | std::ios::trunc) << b;
  EXPECT_THROW(read_npz(q), InputError);
}

void write_criteo(const std::string& p, std::uint64_t n, std::int64_t cat, std::int32_t label = 1,
                  std::uint64_t xcat_cols = kCriteoSparse) {
  std::vector<std::int64_t> xi(n * kCriteoDense), xc(n * xcat_cols, cat);
  std::vector<std::int32_t> y(n, label);
  for (std::size_t k = 0; k < xi.size(); ++k) xi[k] = static_cast<std::int64_t>(k) - 3;
  NpzWriter w(p);
  w.add("X_int", {n, kCriteoDense}, std::span<const std::int64_t>(xi));
  w.add("X_cat", {n, xcat_cols}, std::span<const std::int64_t>(xc));
  w.add("y", {n}, std::span<const std::int32_t>(y));
  w.finish();
}

TEST(CriteoNpz, RecordsGetTheTsvTransforms) {
  test::TempDir d;
  const auto p = (d.path / "c.npz").string();
  write_criteo(p, 3, 4000000000LL);
  const RecordSet rs = RecordSet::load(p);
  ASSERT_EQ(rs.size(), 3u);
  const CriteoRecord& r = rs.records()[1];
  EXPECT_EQ(r.label, 1.f);
  EXPECT_EQ(r.dense[0], criteo_dense_transform(13 - 3));
  EXPECT_EQ(rs.records()[0].dense[0], 0.f);  // -3 clamps to 0
  EXPECT_EQ(r.sparse[25], 4000000000u);
}

TEST(CriteoNpz, BadArraysAreOneLineErrors) {
  test::TempDir d;
  const auto p = (d.path / "c.npz").string();
  auto error_of = [&] {
    try {
      read_criteo_npz(p);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  write_criteo(p, 3, -1);
  EXPECT_NE(error_of().find("c.npz', array 'X_cat': value -1 at row 0, feature 0"), std::string::npos) << error_of();
  write_criteo(p, 3, 5, 2);
  EXPECT_NE(error_of().find("array 'y': label 2"), std::string::npos) << error_of();
  write_criteo(p, 3, 5, 1, 25);
  EXPECT_NE(error_of().find("array 'X_cat': shape (3, 25), expected (N, 26)"), std::string::npos) << error_of();
  {
    NpzWriter w(p);
    const std::vector<float> f(13);
    w.add("X_int", {1, 13}, std::span(f));
    w.finish();
  }
  EXPECT_NE(error_of().find("array 'X_int': <f4 values, integers expected"), std::string::npos) << error_of();
  {
    NpzWriter w(p);
    w.finish();
  }
  EXPECT_NE(error_of().find("no array 'X_int'"), std::string::npos) << error_of();
}

// Files written by numpy (np.savez, np.savez_compressed), and sparq's files
// read by numpy, when a Python with numpy is there (SPARQ_TEST_PYTHON, else
// /usr/bin/python3).
std::string python() {
  const char* p = std::getenv("SPARQ_TEST_PYTHON");
  return p ? p : "/usr/bin/python3";
}

bool have_numpy() { return std::system((python() + " -c 'import numpy' 2>/dev/null").c_str()) == 0; }

int run_python(const std::string& code, const std::string& arg) {
  return std::system((python() + " -c '" + code + "' " + arg).c_str());
}

TEST(NpzNumpy, ReadsWhatNumpyWrites) {
  if (!have_numpy()) GTEST_SKIP() << python() << " has no numpy";
  test::TempDir d;
  const std::string code = R"(
import sys, numpy as np
a = dict(b=np.array([True, False, True]), i1=np.arange(-3, 3, dtype=np.int8), i2=np.arange(6, dtype=np.int16).reshape(2, 3),
         i4=np.array([-7, 2**31 - 1], np.int32), i8=np.array([[-2**40]], np.int64), u1=np.array([255], np.uint8),
         u2=np.array([65535], np.uint16), u4=np.array([2**32 - 1], np.uint32), u8=np.array([2**63], np.uint64),
         f4=np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4), f8=np.array(np.pi), e=np.zeros((0, 26), np.int32))
np.savez(sys.argv[1] + "/s.npz", **a)
np.savez_compressed(sys.argv[1] + "/c.npz", **a)
np.savez(sys.argv[1] + "/fortran.npz", x=np.asfortranarray(np.ones((2, 3))))
np.savez(sys.argv[1] + "/big.npz", x=np.ones(3, ">i4"))
np.savez(sys.argv[1] + "/rec.npz", x=np.zeros(2, "i4,f4"))
np.savez(sys.argv[1] + "/obj.npz", x=np.array(["a"], dtype=object))
import zipfile
zipfile.ZIP64_LIMIT = 10  # zip64 extra fields and end records, as a file over 4 GiB has
np.savez_compressed(sys.argv[1] + "/z64.npz", **a)
)";
  ASSERT_EQ(run_python(code, d.path.string()), 0);
  for (const char* f : {"s.npz", "c.npz", "z64.npz"}) {
    SCOPED_TRACE(f);
    const auto m = read_npz((d.path / f).string());
    ASSERT_EQ(m.size(), 12u);
    EXPECT_EQ(m.at("b").type(), NpyType::Bool);
    EXPECT_EQ(values<int>(m.at("b")), (std::vector<int>{1, 0, 1}));
    EXPECT_EQ(values<int>(m.at("i1")), (std::vector<int>{-3, -2, -1, 0, 1, 2}));
    EXPECT_EQ(m.at("i2").shape(), (std::vector<std::uint64_t>{2, 3}));
    EXPECT_EQ(m.at("i2").int_at(5), 5);
    EXPECT_EQ(m.at("i4").int_at(0), -7);
    EXPECT_EQ(m.at("i4").int_at(1), 2147483647);
    EXPECT_EQ(m.at("i8").int_at(0), -(std::int64_t{1} << 40));
    EXPECT_EQ(m.at("u1").int_at(0), 255);
    EXPECT_EQ(m.at("u2").int_at(0), 65535);
    EXPECT_EQ(m.at("u4").int_at(0), 4294967295LL);
    EXPECT_EQ(m.at("u8").real_at(0), 9223372036854775808.0);
    EXPECT_EQ(m.at("f4").type(), NpyType::F32);
    EXPECT_FLOAT_EQ(static_cast<float>(m.at("f4").real_at(11)), 1.f);
    EXPECT_FLOAT_EQ(static_cast<float>(m.at("f4").real_at(1)), 1.f / 11);
    EXPECT_EQ(m.at("f8").shape().size(), 0u);
    EXPECT_DOUBLE_EQ(m.at("f8").real_at(0), 3.141592653589793);
    EXPECT_EQ(m.at("e").count(), 0u);
  }
  auto error_of = [&](const char* f) {
    try {
      read_npz((d.path / f).string());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("fortran.npz").find("fortran.npz', array 'x.npy': Fortran-order"), std::string::npos)
      << error_of("fortran.npz");
  EXPECT_NE(error_of("big.npz").find("big-endian"), std::string::npos) << error_of("big.npz");
  EXPECT_NE(error_of("rec.npz").find("structured dtypes"), std::string::npos) << error_of("rec.npz");
  EXPECT_NE(error_of("obj.npz").find("unsupported dtype '|O'"), std::string::npos) << error_of("obj.npz");
}

TEST(NpzNumpy, NumpyReadsWhatSparqWrites) {
  if (!have_numpy()) GTEST_SKIP() << python() << " has no numpy";
  test::TempDir d;
  const auto p = (d.path / "w.npz").string();
  {
    NpzWriter w(p);
    const std::vector<float> f{1.5f, -2.f, 3.25f, 0.f, 1e-8f, 7.f};
    const std::vector<std::int32_t> i{-1, 2, 2147483647};
    const std::vector<std::int64_t> l{-5000000000LL};
    w.add("emb_l.0.weight", {3, 2}, std::span(f));
    w.add("i", {3}, std::span(i));
    w.add("l", {}, std::span(l));
    w.finish();
  }
  const std::string code = R"(
import sys, zipfile, numpy as np
assert zipfile.ZipFile(sys.argv[1]).testzip() is None
m = np.load(sys.argv[1])
assert sorted(m.files) == ["emb_l.0.weight", "i", "l"], m.files
w = m["emb_l.0.weight"]
assert w.dtype == np.float32 and w.shape == (3, 2) and w.flags.c_contiguous
assert (w == np.array([[1.5, -2], [3.25, 0], [1e-8, 7]], np.float32)).all()
assert m["i"].dtype == np.int32 and list(m["i"]) == [-1, 2, 2**31 - 1]
assert m["l"].dtype == np.int64 and m["l"].shape == () and m["l"] == -5000000000
)";
  EXPECT_EQ(run_python(code, p), 0);
}

}  // namespace
}  // namespace sparq
