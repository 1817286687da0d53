#include "sparq/coll/comm_engine.h"

namespace sparq {

bool Work::test() const {
  SPARQ_CHECK(f_.valid(), "test() on an empty Work");
  return f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

CollStats Work::wait() const {
  SPARQ_CHECK(f_.valid(), "wait() on an empty Work");
  return f_.get();
}

CommEngine::CommEngine(Transport& t) : t_(t), rank_(t.rank()), size_(t.size()), thread_([this] { loop(); }) {}

CommEngine::~CommEngine() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Work CommEngine::submit(Job job) {
  std::promise<CollStats> p;
  Work w(p.get_future().share());
  {
    std::lock_guard lk(mu_);
    SPARQ_CHECK(!stopping_, "submit() on a stopping CommEngine");
    queue_.emplace_back(std::move(job), std::move(p));
  }
  cv_.notify_one();
  return w;
}

void CommEngine::loop() {
  for (;;) {
    std::pair<Job, std::promise<CollStats>> item;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    auto& [job, promise] = item;
    if (failed_) {
      promise.set_exception(failed_);
      continue;
    }
    try {
      promise.set_value(job(t_));
    } catch (...) {
      failed_ = std::current_exception();
      promise.set_exception(failed_);
    }
  }
}

}  // namespace sparq
