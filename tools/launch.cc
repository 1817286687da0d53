// `sparq launch`: a thin supervisor over mpiexec that restarts a training job
// on the hosts that still answer after it lost one (docs/reliability.md).
//
//   sparq launch --hosts FILE [--restarts N] [--mpiexec CMD] [--probe-timeout S] -- train ARGS...
//
// Each launch runs `CMD --hostfile LIVE -np P THIS_BINARY train ARGS`, LIVE
// the lines of FILE whose hosts answered (P their slots). When a launch
// fails, every host of FILE is probed (`CMD --host H -np 1 true`, S seconds
// at most, all at once): if every host answers, the failure was not a lost
// host and is final (a bad flag fails the same way every time); otherwise
// the job starts again on the hosts that answer, from the newest complete
// checkpoint that train's `--save` wrote (`--load` is replaced), at most N
// times. The global batch is train's `--mini-batch-size` and stays as it
// is (the ranks split it anew), and so does the learning rate.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "sparq/core/error.h"
#include "sparq/model/checkpoint.h"
#include "tools/commands.h"

namespace sparq::cli {

namespace {

struct LaunchArgs {
  std::string hosts, mpiexec = "mpiexec";
  int restarts = 3;
  double probe_timeout = 20;
  std::vector<std::string> train;  // "train" and its flags
};

struct HostLine {
  std::string name, line;
  int slots = 1;
};

using Clock = std::chrono::steady_clock;

std::vector<HostLine> read_hosts(const std::string& path) {
  std::ifstream in(path);
  SPARQ_CHECK_AS(InputError, in.good(), "--hosts '{}': cannot open", path);
  std::vector<HostLine> hosts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string body = line.substr(0, line.find('#'));
    std::istringstream words(body);
    HostLine h{"", line};
    if (!(words >> h.name)) continue;
    for (std::string w; words >> w;) {
      const auto eq = w.find('=');
      const std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
      SPARQ_CHECK_AS(InputError,
                     (key == "slots" || key == "max_slots") && !value.empty() && value.size() <= 6 &&
                         std::all_of(value.begin(), value.end(), ::isdigit),
                     "{}:{}: '{}' is not slots=N", path, n, w);
      if (key == "slots") h.slots = std::stoi(value);
      SPARQ_CHECK_AS(InputError, h.slots >= 1, "{}:{}: slots must be >= 1", path, n);
    }
    hosts.push_back(h);
  }
  SPARQ_CHECK_AS(InputError, !hosts.empty(), "--hosts '{}': no host in it", path);
  return hosts;
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Starts argv in a process group of its own (so that a signal to the
// supervisor can end the whole launch, and a probe can be ended whole).
pid_t spawn(const std::vector<std::string>& argv, bool quiet) {
  const pid_t pid = fork();
  SPARQ_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    if (quiet) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
    }
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    std::fprintf(stderr, "sparq launch: cannot run '%s'\n", a[0]);
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Which hosts answer: `mpiexec --host H -np 1 true` for every host at once,
// each given `timeout` seconds.
std::vector<bool> probe(const LaunchArgs& a, const std::vector<HostLine>& hosts) {
  std::vector<pid_t> pids;
  for (const auto& h : hosts) {
    auto argv = split_words(a.mpiexec);
    argv.insert(argv.end(), {"--host", h.name, "-np", "1", "true"});
    pids.push_back(spawn(argv, true));
  }
  std::vector<bool> alive(hosts.size(), false);
  std::vector<bool> done(hosts.size(), false);
  const auto deadline = Clock::now() + std::chrono::duration<double>(a.probe_timeout);
  for (std::size_t left = hosts.size(); left > 0 && Clock::now() < deadline;) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (done[i] || waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      done[i] = true, --left;
      alive[i] = exit_code(status) == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (std::size_t i = 0; i < pids.size(); ++i)
    if (!done[i]) kill(-pids[i], SIGKILL), waitpid(pids[i], nullptr, 0);
  return alive;
}

// The value of train's flag (--name VALUE or --name=VALUE), or "".
std::string flag_value(const std::vector<std::string>& train, const std::string& name) {
  for (std::size_t i = 0; i < train.size(); ++i) {
    if (train[i] == name && i + 1 < train.size()) return train[i + 1];
    if (train[i].starts_with(name + "=")) return train[i].substr(name.size() + 1);
  }
  return "";
}

// train's flags without --load (and its value).
std::vector<std::string> without_load(const std::vector<std::string>& train) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < train.size(); ++i) {
    if (train[i] == "--load") ++i;
    else if (!train[i].starts_with("--load=")) out.push_back(train[i]);
  }
  return out;
}

struct Point {
  std::string path;
  long step = -1;
};

// The newest checkpoint that `--save PATH` left and that reads whole (CRC
// checked; for a delta, every link of its chain): PATH itself, or with
// {step} in PATH the highest step there. A damaged one or a broken chain is
// skipped, saying so.
Point newest_checkpoint(const std::string& save) {
  namespace fs = std::filesystem;
  std::vector<std::pair<long, std::string>> candidates;
  if (save.find("{step}") == std::string::npos) {
    if (fs::exists(save)) candidates.emplace_back(0, save);
  } else {
    const fs::path pattern(save);
    const fs::path dir = pattern.has_parent_path() ? pattern.parent_path() : fs::path(".");
    const std::string name = pattern.filename().string(), pre = name.substr(0, name.find("{step}")),
                      post = name.substr(name.find("{step}") + 6);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string f = e.path().filename().string();
      if (f.size() <= pre.size() + post.size() || !f.starts_with(pre) || !f.ends_with(post)) continue;
      const std::string digits = f.substr(pre.size(), f.size() - pre.size() - post.size());
      if (std::all_of(digits.begin(), digits.end(), ::isdigit))
        candidates.emplace_back(std::stol(digits), e.path().string());
    }
    std::sort(candidates.rbegin(), candidates.rend());
  }
  for (const auto& [step, path] : candidates) {
    try {
      checkpoint_chain(path);
      const auto meta = nlohmann::json::parse(read_checkpoint_meta(path));
      return {path, meta.value("step", 0L)};
    } catch (const std::exception& e) {
      fmt::print(stderr, "sparq launch: skipping '{}': {}\n", path, e.what());
    }
  }
  return {};
}

// Resolved once, by the first launch: a binary replaced since (rebuilt or
// upgraded in place) is then started again by its path, where /proc/self/exe
// would by then read "PATH (deleted)".
const std::string& self_path() {
  static const std::string path = [] {
    char buf[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    SPARQ_CHECK(n > 0, "cannot find this program's path");
    return std::string(buf, static_cast<std::size_t>(n));
  }();
  return path;
}

// SIGINT or SIGTERM: passed on to the launch in progress, and no restart
// after it; between launches, the default action.
volatile sig_atomic_t g_child = 0, g_stopped = 0;
void forward(int sig) {
  g_stopped = sig;
  if (g_child > 0) {
    kill(-g_child, sig);
  } else {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

// The ranks train can run on: a multiple of its --mp-splits stages (one
// more than its cuts, which commas part: `bot:2,top:2` makes 3).
int rank_multiple(const std::vector<std::string>& train) {
  const std::string splits = flag_value(train, "--mp-splits");
  return splits.empty() ? 1 : 2 + static_cast<int>(std::count(splits.begin(), splits.end(), ','));
}

// The most ranks train can run on these hosts: their slots, down to a
// multiple of its stages (the other slots stay idle).
int ranks_on(const std::vector<HostLine>& hosts, const std::vector<std::string>& train) {
  int slots = 0;
  for (const auto& h : hosts) slots += h.slots;
  return slots - slots % rank_multiple(train);
}

// One launch on the live hosts, on the most ranks train can run on; its
// exit code.
int launch_once(const LaunchArgs& a, const std::vector<HostLine>& live, const std::vector<std::string>& train,
                const std::string& hostfile) {
  std::ofstream out(hostfile);
  for (const auto& h : live) out << h.line << "\n";
  const int np = ranks_on(live, train);
  out.close();
  SPARQ_CHECK(out.good(), "cannot write '{}'", hostfile);
  auto argv = split_words(a.mpiexec);
  argv.insert(argv.end(), {"--hostfile", hostfile, "-np", std::to_string(np), self_path()});
  argv.insert(argv.end(), train.begin(), train.end());
  const pid_t child = spawn(argv, false);
  g_child = child;
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  return exit_code(status);
}

std::string names(const std::vector<HostLine>& hosts) {
  std::string s;
  for (const auto& h : hosts) s += (s.empty() ? "" : " ") + h.name;
  return s;
}

void run_launch(LaunchArgs a) {
  SPARQ_CHECK_AS(InputError, !a.train.empty() && a.train[0] == "train",
                 "launch supervises `train`: give `-- train FLAGS...`");
  SPARQ_CHECK_AS(InputError, a.restarts >= 0, "--restarts must be >= 0, got {}", a.restarts);
  SPARQ_CHECK_AS(InputError, a.probe_timeout > 0, "--probe-timeout must be > 0 seconds");
  const std::vector<HostLine> all = read_hosts(a.hosts);
  const std::string save = flag_value(a.train, "--save");
  SPARQ_CHECK_AS(InputError, a.restarts == 0 || (!save.empty() && !flag_value(a.train, "--save-every").empty()),
                 "--restarts needs train's --save PATH and --save-every N: a restart starts from the newest "
                 "checkpoint they write");
  SPARQ_CHECK_AS(InputError, !split_words(a.mpiexec).empty(), "--mpiexec is empty");
  signal(SIGINT, forward);
  signal(SIGTERM, forward);
  // The live hosts' lines, for mpiexec here (the hosts never read it).
  const std::string hostfile =
      (std::filesystem::temp_directory_path() / fmt::format("sparq-launch-{}.hosts", getpid())).string();
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove_hostfile{hostfile};
  std::vector<HostLine> live = all;
  std::vector<std::string> train = a.train;
  for (int attempt = 0;; ++attempt) {
    const auto t0 = Clock::now();
    const int rc = launch_once(a, live, train, hostfile);
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rc == 0) {
      fmt::print(stderr, "sparq launch: finished on {} host(s) after {} restart(s)\n", live.size(), attempt);
      return;
    }
    SPARQ_CHECK_AS(InputError, g_stopped == 0, "launch {} stopped by signal {}: not restarted", attempt + 1,
                   static_cast<int>(g_stopped));
    const auto alive = probe(a, all);
    std::vector<HostLine> answering, lost;
    for (std::size_t i = 0; i < all.size(); ++i) (alive[i] ? answering : lost).push_back(all[i]);
    SPARQ_CHECK_AS(InputError, !lost.empty(),
                   "launch {} failed (exit {}) after {:.1f} s with every host answering: not a lost host, not "
                   "restarted", attempt + 1, rc, took);
    // A restart that fails with no further host lost fails for another
    // reason (the job refuses the hosts left, say): again would fail alike.
    SPARQ_CHECK_AS(InputError, lost.size() > all.size() - live.size(),
                   "launch {} failed (exit {}) after {:.1f} s with no host lost since launch {}: not restarted",
                   attempt + 1, rc, took, attempt);
    const int ranks = ranks_on(answering, a.train);
    SPARQ_CHECK_AS(InputError, ranks > 0,
                   "launch {} failed (exit {}): {} of the hosts of '{}' answer, too few for {} stages", attempt + 1,
                   rc, answering.empty() ? "none" : std::to_string(answering.size()), a.hosts,
                   rank_multiple(a.train));
    SPARQ_CHECK_AS(InputError, attempt < a.restarts, "launch {} failed (exit {}), lost {}; no restart left (--restarts {})",
                   attempt + 1, rc, names(lost), a.restarts);
    const Point from = newest_checkpoint(save);
    if (from.step >= 0) {  // else as first given: from the start, or the user's own --load
      train = without_load(a.train);
      train.insert(train.end(), {"--load", from.path});
    }
    fmt::print(stderr, "sparq launch: launch {} failed (exit {}) after {:.1f} s; lost {}; restarting on {} ({} host(s), "
               "{} ranks) from {}\n", attempt + 1, rc, took, names(lost), names(answering), answering.size(),
               ranks,
               from.step >= 0 ? fmt::format("'{}' (step {})", from.path, from.step) : "where it began (no checkpoint yet)");
    live = answering;
  }
}

}  // namespace

void add_launch(CLI::App& app, Run& run) {
  auto* c = app.add_subcommand("launch", "run `train` under mpiexec, restarting it on the hosts that still answer "
                                         "after a host is lost");
  auto a = std::make_shared<LaunchArgs>();
  c->add_option("--hosts", a->hosts, "Open MPI host file: one host a line, optional slots=N")->required();
  c->add_option("--restarts", a->restarts, "restarts after a lost host, at most")->capture_default_str();
  c->add_option("--mpiexec", a->mpiexec, "the launcher command and its flags (split at spaces)")
      ->capture_default_str();
  c->add_option("--probe-timeout", a->probe_timeout, "seconds a host has to answer a probe")->capture_default_str();
  c->add_option("train", a->train, "-- train FLAGS...: the job")->required();
  c->callback([a, &run] { run = [a] { run_launch(*a); }; });
}

}  // namespace sparq::cli
