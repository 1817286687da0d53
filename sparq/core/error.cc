#include "sparq/core/error.h"

#include <string_view>

namespace sparq::detail {

std::string located(const char* file, int line, const std::string& msg) {
  // Keep the path from "sparq/" or "tools/" on: the build directory's absolute
  // prefix says nothing to a reader.
  std::string_view f(file);
  for (std::string_view root : {"/sparq/", "/tools/", "/tests/", "/bench/"}) {
    if (auto pos = f.rfind(root); pos != std::string_view::npos) {
      f.remove_prefix(pos + 1);
      break;
    }
  }
  return fmt::format("{} [{}:{}]", msg, f, line);
}

}  // namespace sparq::detail

namespace sparq {

void rethrow_with_prefix(const std::string& prefix) {
  try {
    throw;
  } catch (const TimeoutError& e) {
    throw TimeoutError(prefix + ": " + e.what());
  } catch (const WireError& e) {
    throw WireError(prefix + ": " + e.what());
  } catch (const NonFiniteError& e) {
    throw NonFiniteError(prefix + ": " + e.what());
  } catch (const InputError& e) {
    throw InputError(prefix + ": " + e.what());
  } catch (const AbortedError& e) {
    throw AbortedError(prefix + ": " + e.what());
  } catch (const std::exception& e) {
    throw Error(prefix + ": " + e.what());
  }
}

}  // namespace sparq
