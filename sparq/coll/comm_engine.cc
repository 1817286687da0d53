#include "sparq/coll/comm_engine.h"

namespace sparq {

bool Work::test() const {
  SPARQ_CHECK(f_.valid(), "test() on an empty Work");
  return f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

CollStats Work::wait() const {
  SPARQ_CHECK(f_.valid(), "wait() on an empty Work");
  CollStats s = f_.get();
  if (s.done_at) t_->virtual_wait_until(*s.done_at);
  return s;
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
      s.done_at = t_.virtual_time();
      item.done.set_value(std::move(s));
    } catch (...) {
      failed_ = std::current_exception();
      item.done.set_exception(failed_);
    }
  }
}

}  // namespace sparq
