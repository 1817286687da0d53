#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>
#include <zlib.h>

namespace sparq::test {

// A fresh directory per test, removed afterwards.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = std::filesystem::temp_directory_path() /
           (std::string("sparq_") + info->test_suite_name() + "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name, const std::string& content) const {
    const auto p = (path / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  // The same, gzip-compressed.
  std::string gzip_file(const std::string& name, const std::string& content) const {
    const auto p = (path / name).string();
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, content.data(), static_cast<unsigned>(content.size()));
    gzclose(f);
    return p;
  }
};

}  // namespace sparq::test
