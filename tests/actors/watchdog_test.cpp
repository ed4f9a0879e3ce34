// watchdog_test.cpp: the hang test of actors/watchdog.hpp: a shard busy past the timeout and
// not waiting for peers is stuck; one waiting in a collective is spared; and one whose groups
// were just aborted (a lost peer's victim, about to fail its step) gets a full timeout from
// the abort before it counts as stuck (a worker-process fault test once replaced such a victim
// as hung in the moment between the abort and its step's failure).
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "actors/watchdog.hpp"

using namespace troupe::actors;

TEST(Watchdog, StuckSparesWaitersAndJustFreedVictims) {
  watchdog w;
  std::atomic<bool> waiting{false};
  std::atomic<int> aborts{0};
  watchdog::probes p;
  p.waiting = [&] { return waiting.load(); };
  p.abort = [&](uint64_t, const std::string&) { ++aborts; };
  w.enlist(7, p);
  const double timeout = 0.05;
  EXPECT_EQ(w.stuck(7, timeout), 0); // idle
  w.busy(7, true);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(w.stuck(7, timeout), timeout); // busy past the timeout, not waiting
  waiting = true;
  EXPECT_EQ(w.stuck(7, timeout), 0); // a victim waiting for a peer
  waiting = false;
  w.abort_all(2, "peer lost");
  EXPECT_EQ(aborts.load(), 1);
  EXPECT_EQ(w.stuck(7, timeout), 0); // just freed: time to fail its step
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(w.stuck(7, timeout), 0.15); // still in the step a timeout after: stuck (whole step)
  w.busy(7, false);
  EXPECT_EQ(w.stuck(7, timeout), 0);
  w.busy(7, true); // the next step starts its own clock
  EXPECT_EQ(w.stuck(7, timeout), 0);
  w.leave(7);
  EXPECT_EQ(w.stuck(7, timeout), 0);
}
