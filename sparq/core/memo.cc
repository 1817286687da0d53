#include "sparq/core/memo.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

namespace sparq {

namespace {

struct MemoEntry {
  std::once_flag made;
  std::unique_ptr<std::byte[]> bytes;
};

struct MemoStore {
  std::mutex m;
  int users = 0;  // live Memos
  std::map<std::string, std::shared_ptr<MemoEntry>> entries;
};
MemoStore& memo_store() {
  static MemoStore k;
  return k;
}

// The key's entry while a Memo lives, else nullptr.
std::shared_ptr<MemoEntry> memo_entry(const std::string& key) {
  MemoStore& k = memo_store();
  std::lock_guard lock(k.m);
  if (k.users == 0) return nullptr;
  std::shared_ptr<MemoEntry>& e = k.entries[key];
  if (!e) e = std::make_shared<MemoEntry>();
  return e;
}

}  // namespace

Memo::Memo() {
  std::lock_guard lock(memo_store().m);
  ++memo_store().users;
}

Memo::~Memo() {
  MemoStore& k = memo_store();
  std::lock_guard lock(k.m);
  if (--k.users == 0) k.entries.clear();
}

void memo_fill_bytes(const std::string& key, std::span<std::byte> out,
                     const std::function<void(std::span<std::byte>)>& make) {
  const std::shared_ptr<MemoEntry> e = memo_entry(fmt::format("{} ({} bytes)", key, out.size()));
  if (!e) return make(out);
  // Other callers of the key wait here for the first one's values.
  std::call_once(e->made, [&] {
    e->bytes = std::make_unique_for_overwrite<std::byte[]>(out.size());
    make({e->bytes.get(), out.size()});
  });
  if (!out.empty()) std::memcpy(out.data(), e->bytes.get(), out.size());
}

}  // namespace sparq
