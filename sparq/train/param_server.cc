#include "sparq/train/param_server.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>

#include "sparq/coll/call.h"
#include "sparq/coll/patterns.h"
#include "sparq/compress/stream_codec.h"
#include "sparq/core/finite.h"
#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"
#include "sparq/model/optimizer.h"
#include "sparq/train/table_wise.h"

namespace sparq {

namespace {

constexpr int kRequestTag = tags::kParamServer, kReplyTag = tags::kParamServer + 1;
enum class Msg : std::uint32_t { Pull = 1, Push = 2, Done = 3, Fetch = 4 };


// Little-endian message building and bounds-checked reading.
struct Writer {
  std::vector<std::byte> out;
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  template <class T>
  void put_span(std::span<const T> v) {
    const auto b = std::as_bytes(v);
    out.insert(out.end(), b.begin(), b.end());
  }
};

struct Reader {
  std::span<const std::byte> in;
  std::string what;  // names the message in errors
  template <class T>
  T get() {
    T v;
    take(std::as_writable_bytes(std::span<T>(&v, 1)));
    return v;
  }
  template <class T>
  void get_span(std::span<T> v) {
    take(std::as_writable_bytes(v));
  }
  void take(std::span<std::byte> dst) {
    SPARQ_CHECK_AS(WireError, dst.size() <= in.size(), "{}: truncated ({} bytes missing)", what,
                   dst.size() - in.size());
    std::memcpy(dst.data(), in.data(), dst.size());
    in = in.subspan(dst.size());
  }
  void end() const { SPARQ_CHECK_AS(WireError, in.empty(), "{}: {} trailing bytes", what, in.size()); }
};

void put_header(Writer& w, Msg type, std::uint64_t step) {
  w.put(static_cast<std::uint32_t>(type));
  w.put(std::uint32_t{0});
  w.put(step);
}


}  // namespace

PsLayout::PsLayout(const Dlrm<float>& model, int workers_, int servers_) : workers(workers_), servers(servers_) {
  SPARQ_CHECK_AS(InputError, workers >= 1 && servers >= 1, "parameter server needs workers and servers, got {} and {}",
                 workers, servers);
  std::vector<std::size_t> sizes;
  for (const auto& v : model.dense().views()) sizes.push_back(v.size);
  view_server = assign_tables(sizes, servers);  // largest first to the least loaded
  sizes.clear();
  for (const auto& t : model.tables()) sizes.push_back(t.rows() * t.dim());
  table_server = assign_tables(sizes, servers);
}

PsWorker::PsWorker(Transport& t, Dlrm<float>& model, const PsLayout& layout, DpCodec codec,
                   compress::ErrorFeedbackStore& residuals)
    : t_(t), model_(model), layout_(layout), codec_(std::move(codec)), residuals_(residuals) {
  SPARQ_CHECK_AS(InputError, codec_.kind == DpCodec::Kind::None || codec_.kind == DpCodec::Kind::Dct,
                 "--dp-mode ps pushes dense gradients with --dp-codec none or dct:ETA,L, not '{}'", codec_.text);
  if (codec_.kind == DpCodec::Kind::Dct)
    dct_.emplace(compress::DctDpOptions{codec_.eta, codec_.life_span, 0.0, codec_.values}, residuals_);
}

void PsWorker::send(int server, std::vector<std::byte> msg) {
  bufs_.push_back(std::move(msg));
  sends_.push_back(t_.isend(layout_.server_rank(server), kRequestTag, bufs_.back()));
}

void PsWorker::wait_sends() {
  wait_all(sends_, t_.timeout());
  sends_.clear();
  bufs_.clear();
}

PsWorkerStats PsWorker::step(const Batch& global, std::uint64_t k) {
  PsWorkerStats st;
  const pattern::Partition shares{global.size, layout_.workers};
  slice_batch(global, shares.offset(t_.rank()), shares.len(t_.rank()), local_);
  wait_sends();  // the previous step's pushes
  pull(k, st);
  wait_sends();
  compute(global.size, st);
  push(k, st);
  return st;
}

// Pull: every dense tensor and the rows this share looks up.
void PsWorker::pull(std::uint64_t k, PsWorkerStats& st) {
  auto& tables = model_.tables();
  auto& dense = model_.dense();
  std::vector<std::vector<std::uint32_t>> rows(tables.size());
  for (std::size_t tb = 0; tb < tables.size(); ++tb) {
    rows[tb].assign(local_.sparse[tb].indices.begin(), local_.sparse[tb].indices.end());
    std::sort(rows[tb].begin(), rows[tb].end());
    rows[tb].erase(std::unique(rows[tb].begin(), rows[tb].end()), rows[tb].end());
  }
  std::vector<Request> replies;
  for (int s = 0; s < layout_.servers; ++s) {
    Writer m;
    put_header(m, Msg::Pull, k);
    for (std::size_t tb = 0; tb < tables.size(); ++tb)
      if (layout_.table_server[tb] == s) {
        m.put(static_cast<std::uint32_t>(rows[tb].size()));
        m.put_span(std::span<const std::uint32_t>(rows[tb]));
      }
    send(s, std::move(m.out));
    replies.push_back(t_.irecv_message(layout_.server_rank(s), kReplyTag));
  }
  const auto recv_before = t_.counters().total().bytes_recv;
  const auto t0 = Clock::now();
  for (int s = 0; s < layout_.servers; ++s) {
    replies[s].wait(t_.timeout());
    const auto msg = replies[s].take_message();
    Reader r{msg, fmt::format("pull reply from server {}", s)};
    for (std::size_t v = 0; v < dense.views().size(); ++v)
      if (layout_.view_server[v] == s) r.get_span(dense.param(v));
    for (std::size_t tb = 0; tb < tables.size(); ++tb)
      if (layout_.table_server[tb] == s)
        for (std::uint32_t row : rows[tb]) r.get_span(tables[tb].row(row));
    r.end();
  }
  st.wait_s = seconds_since(t0);
  st.pull.bytes_sent = t_.counters().total().bytes_recv - recv_before;  // received: what a pull costs
}

// Forward and backward on the share, the loss gradient weighted so that the
// servers' lr / W steps average to the global batch's mean.
void PsWorker::compute(std::size_t global_size, PsWorkerStats& st) {
  st.samples = local_.size;
  if (local_.size == 0) {
    model_.zero_grads();
    return;
  }
  auto t0 = Clock::now();
  const auto logits = model_.forward(local_);
  st.forward_s = seconds_since(t0);
  t0 = Clock::now();
  dlogits_.resize(local_.size);
  st.loss = bce_with_logits<float>(logits, local_.labels, dlogits_);
  st.correct = correct_predictions(logits, local_.labels);
  const float weight =
      static_cast<float>(static_cast<double>(local_.size) * layout_.workers / static_cast<double>(global_size));
  for (float& d : dlogits_) d *= weight;
  model_.backward(dlogits_);
  st.backward_s = seconds_since(t0);
}

// Push to every server its dense tensors' gradients (as sparse streams:
// DCT-DP's or dense) and its tables' row gradients, without waiting for an
// answer.
void PsWorker::push(std::uint64_t k, PsWorkerStats& st) {
  auto& tables = model_.tables();
  auto& dense = model_.dense();
  // Before any residual changes or any server is sent a part of this step.
  for (std::size_t v = 0; v < dense.views().size(); ++v)
    SPARQ_CHECK_FINITE(dense.grad(v), [&] {
      return fmt::format("rank {}, step {}: the gradient of '{}' (push)", t_.rank(), k, dense.views()[v].name);
    });
  for (std::size_t tb = 0; tb < tables.size(); ++tb)
    SPARQ_CHECK_FINITE(model_.sparse_grad(tb).values,
                 [&] { return fmt::format("rank {}, step {}: the gradient of table {} (push)", t_.rank(), k, tb); });
  compress::SparseStream stream;
  for (int s = 0; s < layout_.servers; ++s) {
    Writer m;
    put_header(m, Msg::Push, k);
    for (std::size_t v = 0; v < dense.views().size(); ++v) {
      if (layout_.view_server[v] != s) continue;
      const auto g = dense.grad(v);
      const auto t0 = Clock::now();
      if (dct_) {
        st.w_grad.kept += dct_->step(dense.views()[v].name, k, g, stream).kept;
      } else {
        stream = compress::SparseStream::dense(std::vector<float>(g.begin(), g.end()));
        st.w_grad.kept += g.size();
      }
      st.w_grad.compress_seconds += seconds_since(t0);
      std::vector<std::byte> enc(compress::encoded_size(stream, codec_.values));
      compress::encode_stream(stream, enc, codec_.values);
      m.put(static_cast<std::uint32_t>(enc.size()));
      m.put_span(std::span<const std::byte>(enc));
      st.w_grad.dense_bytes += g.size() * sizeof(float);
      st.w_grad.values += g.size();
    }
    const std::size_t dense_part = m.out.size();
    for (std::size_t tb = 0; tb < tables.size(); ++tb) {
      if (layout_.table_server[tb] != s) continue;
      const auto& g = model_.sparse_grad(tb);
      m.put(static_cast<std::uint32_t>(g.rows.size()));
      m.put_span(std::span<const std::uint32_t>(g.rows));
      m.put_span(std::span<const float>(g.values));
      st.emb_grad.dense_bytes += row_sparse_allgather_bytes(2, g.rows.size(), tables[tb].dim());  // one push
      st.emb_grad.values += tables[tb].rows() * tables[tb].dim();
      st.emb_grad.kept += g.values.size();
    }
    // The header and the dense part are W_grad's, the rest emb_grad's.
    const std::uint64_t total = m.out.size();
    const auto before = t_.counters().total().bytes_sent;
    send(s, std::move(m.out));
    const std::uint64_t counted = t_.counters().total().bytes_sent - before;
    st.w_grad.bytes_sent += counted - (total - dense_part);
    st.emb_grad.bytes_sent += total - dense_part;
  }
}

void PsWorker::fetch_all(std::uint64_t steps) {
  wait_sends();
  auto& dense = model_.dense();
  for (int s = 0; s < layout_.servers; ++s) {
    Writer m;
    put_header(m, Msg::Fetch, steps);
    send(s, std::move(m.out));
    const auto msg = t_.recv_message(layout_.server_rank(s), kReplyTag);
    Reader r{msg, fmt::format("fetch reply from server {}", s)};
    for (std::size_t v = 0; v < dense.views().size(); ++v)
      if (layout_.view_server[v] == s) r.get_span(dense.param(v));
    for (std::size_t tb = 0; tb < model_.tables().size(); ++tb)
      if (layout_.table_server[tb] == s) r.get_span(model_.tables()[tb].weights());
    r.end();
  }
  wait_sends();
}

void PsWorker::finish() {
  wait_sends();
  for (int s = 0; s < layout_.servers; ++s) {
    Writer m;
    put_header(m, Msg::Done, 0);
    send(s, std::move(m.out));
  }
  wait_sends();
}

namespace {
constexpr std::string_view kWorkerStateMagic = "sparq parameter-server worker state 1";
}  // namespace

std::vector<std::byte> PsWorker::save_state() const {
  BlobWriter w;
  w.str(kWorkerStateMagic);
  w.str(codec_.text);
  residuals_.save(w);
  if (dct_) dct_->save(w);
  return w.take();
}

void PsWorker::load_state(std::span<const std::byte> blob) {
  BlobReader r(blob, "parameter-server worker state");
  SPARQ_CHECK_AS(InputError, r.str() == kWorkerStateMagic, "not a parameter-server worker state (saved by another plan?)");
  const std::string codec = r.str();
  SPARQ_CHECK_AS(InputError, codec == codec_.text, "worker state of codec '{}' loaded into codec '{}'", codec,
                 codec_.text);
  residuals_.load(r);
  if (dct_) dct_->load(r);
  r.expect_end();
}

PsServer::PsServer(Transport& t, Dlrm<float>& model, const PsLayout& layout, double lr, std::uint64_t max_staleness,
                   std::uint64_t first_step)
    : t_(t), model_(model), layout_(layout), lr_(lr), max_staleness_(max_staleness), first_step_(first_step) {}

namespace {

// One server's loop (PsServer::run): receive every worker's messages, apply
// pushes as they arrive, answer pulls once the staleness bound allows.
class ServerLoop {
 public:
  ServerLoop(Transport& t, Dlrm<float>& model, const PsLayout& layout, double lr, std::uint64_t max_staleness,
             std::uint64_t first_step)
      : t_(t),
        model_(model),
        layout_(layout),
        W_(layout.workers),
        self_(t.rank() - layout.workers),
        step_lr_(static_cast<float>(lr / layout.workers)),
        max_staleness_(max_staleness),
        clock_(static_cast<std::size_t>(W_), first_step),
        done_(static_cast<std::size_t>(W_), false),
        req_(static_cast<std::size_t>(W_)) {}

  PsServerStats run() {
    for (int w = 0; w < W_; ++w) req_[w] = t_.irecv_message(w, kRequestTag);
    auto last_heard = Clock::now();
    while (std::find(done_.begin(), done_.end(), false) != done_.end()) {
      bool progressed = receive();
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (ready(*it)) {
          answer(*it);
          it = pending_.erase(it);
          progressed = true;
        } else {
          ++it;
        }
      }
      std::erase_if(replies_, [](Reply& r) { return r.req.test(); });  // answers delivered: free their buffers
      if (progressed) {
        last_heard = Clock::now();
      } else {
        if (Clock::now() - last_heard > t_.timeout()) throw_silent();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    SPARQ_CHECK(pending_.empty(), "parameter server {}: {} pulls unanswered at the end", self_, pending_.size());
    for (Reply& r : replies_) r.req.wait(t_.timeout());
    return st_;
  }

 private:
  struct Pending {
    int worker;
    std::uint64_t step;
    bool fetch;
    std::vector<std::byte> msg;
    Clock::time_point since;
  };
  struct Reply {
    std::vector<std::byte> buf;  // moving the vector keeps its bytes where the send reads them
    Request req;
  };

  // Takes what every worker has sent; true if anything arrived.
  bool receive() {
    bool progressed = false;
    for (int w = 0; w < W_; ++w) {
      if (done_[w] || !req_[w].test()) continue;
      progressed = true;
      std::vector<std::byte> msg = req_[w].take_message();
      Reader r{msg, fmt::format("message from worker {}", w)};
      const auto type = static_cast<Msg>(r.get<std::uint32_t>());
      SPARQ_CHECK_AS(WireError, r.get<std::uint32_t>() == 0, "message from worker {}: bad reserved field", w);
      const auto step = r.get<std::uint64_t>();
      switch (type) {
        case Msg::Pull:
        case Msg::Fetch:
          pending_.push_back({w, step, type == Msg::Fetch, std::move(msg), Clock::now()});
          break;
        case Msg::Push:
          apply_push(w, r);
          ++clock_[w];
          ++st_.pushes;
          break;
        case Msg::Done:
          r.end();
          done_[w] = true;
          break;
        default:
          SPARQ_THROW(WireError, "message from worker {}: unknown type {}", w, static_cast<std::uint32_t>(type));
      }
      if (!done_[w]) req_[w] = t_.irecv_message(w, kRequestTag);
    }
    return progressed;
  }

  // A pull for step k waits until every running worker has pushed k - s
  // steps (a fetch for k: k steps, s = 0); finished workers never hold it back.
  bool ready(const Pending& p) const {
    const std::uint64_t slack = p.fetch ? 0 : max_staleness_;
    for (int v = 0; v < W_; ++v)
      if (!done_[v] && clock_[v] + slack < p.step) return false;
    return true;
  }

  void answer(Pending& p) {
    auto& dense = model_.dense();
    auto& tables = model_.tables();
    Writer out;
    for (std::size_t v = 0; v < dense.views().size(); ++v)
      if (layout_.view_server[v] == self_) out.put_span(std::span<const float>(dense.param(v)));
    Reader r{p.msg, fmt::format("pull from worker {}", p.worker)};
    r.in = r.in.subspan(16);  // header checked on arrival
    for (std::size_t tb = 0; tb < tables.size(); ++tb) {
      if (layout_.table_server[tb] != self_) continue;
      if (p.fetch) {
        out.put_span(std::span<const float>(tables[tb].weights()));
        continue;
      }
      const auto n = r.get<std::uint32_t>();
      SPARQ_CHECK_AS(WireError, n <= tables[tb].rows(), "pull from worker {}: {} rows of table {} ({} rows)", p.worker,
                     n, tb, tables[tb].rows());
      for (std::uint32_t i = 0; i < n; ++i) {
        const auto row = r.get<std::uint32_t>();
        SPARQ_CHECK_AS(WireError, row < tables[tb].rows(), "pull from worker {}: row {} of table {} out of range",
                       p.worker, row, tb);
        out.put_span(std::span<const float>(tables[tb].row(row)));
      }
    }
    r.end();
    st_.stale_wait_s += seconds_since(p.since);
    ++st_.pulls;
    Reply& rep = replies_.emplace_back();
    rep.buf = std::move(out.out);
    rep.req = t_.isend(p.worker, kReplyTag, rep.buf);
  }

  void apply_push(int w, Reader& r) {
    auto& dense = model_.dense();
    for (std::size_t v = 0; v < dense.views().size(); ++v) {
      if (layout_.view_server[v] != self_) continue;
      const auto n = r.get<std::uint32_t>();
      SPARQ_CHECK_AS(WireError, n <= r.in.size(), "push from worker {}: tensor of {} bytes in {}", w, n, r.in.size());
      const auto s = compress::decode_stream(r.in.first(n));
      r.in = r.in.subspan(n);
      const auto p = dense.param(v);
      SPARQ_CHECK_AS(WireError, s.dim() == p.size(), "push from worker {}: {} has {} values, got {}", w,
                     dense.views()[v].name, p.size(), s.dim());
      const auto vals = s.values();
      if (s.is_dense()) {
        for (std::size_t i = 0; i < p.size(); ++i) p[i] -= step_lr_ * vals[i];
      } else {
        const auto idx = s.indices();
        for (std::size_t i = 0; i < idx.size(); ++i) p[idx[i]] -= step_lr_ * vals[i];
      }
    }
    apply_table_push(w, r);
    r.end();
  }

  void apply_table_push(int w, Reader& r) {
    auto& tables = model_.tables();
    for (std::size_t tb = 0; tb < tables.size(); ++tb) {
      if (layout_.table_server[tb] != self_) continue;
      SparseGrad<float> g;
      g.dim = tables[tb].dim();
      const auto n = r.get<std::uint32_t>();
      SPARQ_CHECK_AS(WireError, n <= tables[tb].rows(), "push from worker {}: {} rows for table {}", w, n, tb);
      g.rows.resize(n);
      r.get_span(std::span<std::uint32_t>(g.rows));
      for (std::uint32_t row : g.rows)
        SPARQ_CHECK_AS(WireError, row < tables[tb].rows(), "push from worker {}: row {} of table {} out of range", w,
                       row, tb);
      g.values.resize(std::size_t{n} * g.dim);
      r.get_span(std::span<float>(g.values));
      sgd_rows(tables[tb], g, step_lr_);
    }
  }

  [[noreturn]] void throw_silent() const {
    std::string silent;
    for (int w = 0; w < W_; ++w)
      if (!done_[w]) silent += fmt::format(" {}", w);
    SPARQ_THROW(TimeoutError, "parameter server {}: no message from workers{} for {} ms", self_, silent,
                t_.timeout().count());
  }

  Transport& t_;
  Dlrm<float>& model_;
  const PsLayout& layout_;
  const int W_, self_;
  const float step_lr_;
  const std::uint64_t max_staleness_;
  std::vector<std::uint64_t> clock_;  // steps pushed per worker
  std::vector<bool> done_;
  std::vector<Request> req_;
  std::deque<Pending> pending_;
  std::vector<Reply> replies_;
  PsServerStats st_;
};

}  // namespace

PsServerStats PsServer::run() {
  return ServerLoop(t_, model_, layout_, lr_, max_staleness_, first_step_).run();
}

}  // namespace sparq
