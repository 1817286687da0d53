#include "sparq/coll/comm_engine.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sparq/core/parallel_clock.h"

namespace sparq {

namespace {
// Raises the calling thread's priority to `nice` (Linux keeps a nice value
// per thread: this one's alone changes). Empty, or why not.
std::string raise_priority(int nice) {
  if (nice == 0 || ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice) == 0) return "";
  return fmt::format("nice {} not permitted ({}: it needs CAP_SYS_NICE or RLIMIT_NICE >= {})", nice,
                     std::strerror(errno), 20 - nice);
}
}  // namespace

bool Work::test() const {
  SPARQ_CHECK(f_.valid(), "test() on an empty Work");
  return f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

CollStats Work::wait() const {
  SPARQ_CHECK(f_.valid(), "wait() on an empty Work");
  t_->virtual_idle();
  CollStats s = f_.get();
  if (s.done_at) t_->virtual_wait_until(*s.done_at);
  return s;
}

CommEngine::CommEngine(Transport& t, int nice) : t_(t), rank_(t.rank()), size_(t.size()) {
  SPARQ_CHECK_AS(InputError, nice >= -20 && nice <= 0, "communication thread nice {} outside [-20, 0]", nice);
  std::promise<std::string> note;
  std::future<std::string> said = note.get_future();
  // The thread owns the promise: it may still be inside set_value() when
  // get() returns here.
  // The rank's kernel costs charge its exchanges' kernels too (one thread:
  // no emulated split).
  thread_ = std::thread([this, nice, note = std::move(note), costs = emulated_threads().costs]() mutable {
    ::pthread_setname_np(::pthread_self(), "sparq-comm");  // for top -H and perf
    set_emulated_threads({1, nullptr, costs});
    note.set_value(raise_priority(nice));
    loop();
  });
  priority_note_ = said.get();
}

CommEngine::~CommEngine() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Work CommEngine::submit(Job job) {
  Item item{std::move(job), {}, t_.virtual_time()};
  Work w(item.done.get_future().share(), t_);
  {
    std::lock_guard lk(mu_);
    SPARQ_CHECK(!stopping_, "submit() on a stopping CommEngine");
    queue_.push_back(std::move(item));
  }
  cv_.notify_one();
  return w;
}

void CommEngine::loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (failed_) {
      item.done.set_exception(failed_);
      continue;
    }
    try {
      if (item.at) t_.virtual_wait_until(*item.at);
      CollStats s = item.job(t_);
      t_.virtual_collective_end();
      s.done_at = t_.virtual_time();
      t_.virtual_idle();  // handing over and waiting for the next job
      item.done.set_value(std::move(s));
    } catch (...) {
      failed_ = std::current_exception();
      item.done.set_exception(failed_);
    }
  }
}

}  // namespace sparq
