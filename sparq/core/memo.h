#pragma once
// Values a process makes over and over, made once: while a Memo lives,
// memo_fill(key, out, make) makes a key's values for its first caller (into
// a kept copy) and copies them into every caller's `out`. For a process that
// builds the same model again and again: `sparq plan` trains every plan from
// scratch, and each of its in-process ranks drew the same epoch order and
// every replicated table from the same seeds (a fifth of its CPU went to
// drawing tables, 5 % to shuffling). The bits are the same either way.
// Without a live Memo, memo_fill calls make(out).
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <typeinfo>

namespace sparq {

class Memo {
 public:
  Memo();
  ~Memo();  // the last one to end frees every kept copy
  Memo(const Memo&) = delete;
  Memo& operator=(const Memo&) = delete;
};

// The bytes of `out` as make(out) fills them; `key` names them (every
// input of make but the size of `out`).
void memo_fill_bytes(const std::string& key, std::span<std::byte> out,
                     const std::function<void(std::span<std::byte>)>& make);

template <class T>
void memo_fill(const std::string& key, std::span<T> out,
               const std::function<void(std::span<std::type_identity_t<T>>)>& make) {
  static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  memo_fill_bytes(key + " " + typeid(T).name(), std::as_writable_bytes(out), [&](std::span<std::byte> b) {
    make({reinterpret_cast<T*>(b.data()), b.size() / sizeof(T)});
  });
}

}  // namespace sparq
