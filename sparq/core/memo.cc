#include "sparq/core/memo.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

namespace sparq {

namespace {

struct Entry {
  std::once_flag made;
  std::unique_ptr<std::byte[]> bytes;
};

struct Kept {
  std::mutex m;
  int users = 0;  // live Memos
  std::map<std::string, std::shared_ptr<Entry>> entries;
};
Kept& kept() {
  static Kept k;
  return k;
}

// The key's entry while a Memo lives, else nullptr.
std::shared_ptr<Entry> entry(const std::string& key) {
  Kept& k = kept();
  std::lock_guard lock(k.m);
  if (k.users == 0) return nullptr;
  std::shared_ptr<Entry>& e = k.entries[key];
  if (!e) e = std::make_shared<Entry>();
  return e;
}

}  // namespace

Memo::Memo() {
  std::lock_guard lock(kept().m);
  ++kept().users;
}

Memo::~Memo() {
  Kept& k = kept();
  std::lock_guard lock(k.m);
  if (--k.users == 0) k.entries.clear();
}

void memo_fill_bytes(const std::string& key, std::span<std::byte> out,
                     const std::function<void(std::span<std::byte>)>& make) {
  const std::shared_ptr<Entry> e = entry(fmt::format("{} ({} bytes)", key, out.size()));
  if (!e) return make(out);
  // Other callers of the key wait here for the first one's values.
  std::call_once(e->made, [&] {
    e->bytes = std::make_unique_for_overwrite<std::byte[]>(out.size());
    make({e->bytes.get(), out.size()});
  });
  if (!out.empty()) std::memcpy(out.data(), e->bytes.get(), out.size());
}

}  // namespace sparq
