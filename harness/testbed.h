// The testbed: the one staging sequence every op's properties run a launch through. After
// CUTLASS's Testbed: declare the buffers a launch reads and writes (Buffer: the host bytes the
// oracle reads, then guarded memory on the device) and the output views inside them, then run:
//
//   upload every buffer; declare each output view as the only bytes its buffer may change; arm
//   (poison the outputs, snapshot the rest, restore the red zones); refuse an input that was
//   declared non-zero but is all zero; fence every byte outside the launch's input and output
//   views (under AddressSanitizer on the host backend, core/read_fence.h: a read past a view is
//   then seen too); launch under the case's host schedule; synchronize; lift the fence; check every
//   guard, then the fence; read the outputs back; compare; refuse an output declared non-zero that
//   came back all zero (the oracle agreed, so the case could not tell a kernel that writes zeros).
//
//   Testbed bed(device, c);                        // c: the case, a CaseSchedule
//   bed.input(s.q, Content::kNonZero).input(s.table).output(s.o);
//   Verdict v = bed.run([&] { fn(device, args); }, [&] { return compare(s.o.host_tensor(), want); });
//
// The all-zero rule (CUTLASS asserts the norm of every operand and result is positive) applies to
// the buffers an op declares kNonZero: payloads whose generators fill every element at random, where
// an all-zero view means the case stages nothing a kernel must read, never a property of the kernel.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/schedule.h"
#include "harness/staged_buffer.h"
#include "harness/verdict.h"
#include "kernels/device.h"

namespace mlacheck {

// Determinism: while one is in scope on this thread, every Testbed launch that passes runs `launches`
// times in all, the later ones re-armed exactly as the first (not restaged: the first launch's
// guards held, so every byte outside its outputs is still as staged, and the arm poisons the
// outputs again; on the host backend each
// under a shuffled schedule of its own seed, so block, warp and thread order change), and a launch
// whose outputs differ from the first's in any bit is the verdict "nondeterministic: ...", with the
// output, the element and both values. The op's `<op>.deterministic` properties set it.
class ScopedRepeats {
 public:
  explicit ScopedRepeats(int launches) : saved_(current()) { current() = launches; }
  ~ScopedRepeats() { current() = saved_; }
  ScopedRepeats(const ScopedRepeats&) = delete;
  ScopedRepeats& operator=(const ScopedRepeats&) = delete;
  static int launches() { return current(); }

 private:
  static int& current() {
    static thread_local int n = 1;
    return n;
  }
  int saved_;
};

enum class Content {
  kAny,      // zeros are a case of their own (lengths, indices, padding, top-k values with ties)
  kNonZero,  // a random payload: all zero only when staging failed, and then the case is refused
};

// What ScopedRepeats' later launches must reproduce of an output view.
enum class Sameness {
  kBits,      // every bit of every element (the default)
  kRowSets,   // each row (every index but the last) as a set of elements: the op's contract leaves the
              // order within a row free (top-k's selected columns), not which elements it holds
  kNotAsked,  // nothing: scratch whose contents the contract leaves free (top-k's split workspace)
  kOwnRule,   // what the caller's rule says of each later launch's bytes (same_across_launches with a
              // rule: top-k under "ties any" asks only that each launch be an admissible top-k)
};

class Testbed {
 public:
  Testbed(kernels::Device& device, const CaseSchedule& schedule) : device_(device), schedule_(schedule) {}
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  // A buffer the launch reads: uploaded, armed and checked whole (no byte of it may change); its
  // view is all the launch may read of it.
  Testbed& input(Buffer& b, Content content = Content::kAny);
  // A buffer the launch writes: its view (or the named view given) is the only part it may change,
  // poisoned before the launch and read back after. A buffer may carry several output views.
  Testbed& output(Buffer& b, Content content = Content::kAny);
  Testbed& output(Buffer& b, const std::string& view_name, const View& view, Content content = Content::kAny);
  // What a repeated launch must reproduce of the output view named (default Sameness::kBits).
  Testbed& same_across_launches(const std::string& view_name, Sameness sameness);
  // The later launches' output is judged by rule instead of compared with the first launch's: it
  // runs with the view's buffer holding that launch's bytes, and its verdict is the launch's.
  Testbed& same_across_launches(const std::string& view_name, std::function<Verdict()> rule);
  // Memory the implementation owns (a builder's persistent buffers, an allocator's blocks): armed
  // and checked with the buffers; all of it may be read, its red zones not. Its output views are the
  // caller's to declare beforehand.
  Testbed& guard(GuardedMemory& memory);
  // An output the launch also reads (counters it adds to, an in-place update): after each arm
  // poisons it, `bytes` go back at the start of b's data, queued on the device's stream, so that
  // every launch starts from them. Repeated launches stay queued back to back (queue_repeats)
  // when every byte written back lies in an output view dense over its span; bytes past those
  // (row padding of an in-place output) take them one at a time, since writing them back between
  // launches would erase an earlier launch's stray write there.
  Testbed& rewrite_after_arm(Buffer& b, std::vector<uint8_t> bytes);
  // Runs after arming, before the launch: any other set-up of bytes arming poisoned. Repeated
  // launches then run one at a time on a device, each armed and checked alone.
  Testbed& after_arm(std::function<void()> f);
  // Every launch writes each buffer's host bytes to the device: into the allocation it already has
  // when its size is unchanged (the same addresses, as an engine refills its buffers between
  // steps), else into a new one. Output views are declared afresh each launch.

  // The sequence above without a comparison: nullopt when the guards held (the outputs' host
  // bytes then hold the device's), else the first failure. A launch that throws propagates.
  Verdict launch(const std::function<void()>& fn);
  // launch(fn), then compare() when the guards held, then the all-zero rule on the outputs.
  Verdict run(const std::function<void()>& fn, const std::function<Verdict()>& compare);

  const CaseSchedule& schedule() const { return schedule_; }

 private:
  struct Staged {
    Buffer* buffer;
    bool output;
    Content content;
    std::string view_name;  // outputs
    View view;              // outputs: the declared view; inputs: the buffer's view
    Sameness sameness = Sameness::kBits;  // outputs
    std::function<Verdict()> rule;        // kOwnRule
  };
  std::vector<Buffer*> buffers() const;  // each once, in declaration order
  void stage(Buffer& b);
  // One launch of the sequence above under the given host options. Without restage the buffers
  // keep the bytes the last launch left: ScopedRepeats' later launches, after one whose guards
  // held, so every byte outside its outputs is as staged, and the arm poisons the outputs again.
  Verdict launch_once(const std::function<void()>& fn, const simt::host::Options& host, bool restage = true);
  // ScopedRepeats' later launches, compared with the first one's outputs (first: each staged
  // entry's host bytes after launch 1, empty for inputs).
  Verdict repeat(const std::function<void()>& fn, int launches);
  // The same on a device that queues them (core/guarded_buffer.h, queue_repeats): every later
  // launch back to back after one arm, one check after the last, each launch's outputs read into
  // page-locked memory and compared after one wait. *queued false: nothing ran, launch one at a time.
  Verdict repeat_queued(const std::function<void()>& fn, int launches, const std::vector<std::vector<uint8_t>>& first,
                        bool* queued);
  // The first output whose bytes now differ from first's as its Sameness asks.
  Verdict differs_from_first(const std::vector<std::vector<uint8_t>>& first, const std::string& which) const;
  // Each buffer restaged (or, without restage, its outputs cleared) and the outputs declared: the
  // guarded memory of the launch, the testbed's guard()s last.
  std::vector<GuardedMemory*> declare_outputs(const std::vector<Buffer*>& all, bool restage);
  std::vector<Buffer*> output_buffers(const std::vector<Buffer*>& all) const;  // holding an output view
  // The first failing guard report as the verdict ("guard of <buffer>: ...").
  Verdict guard_verdict(const std::vector<GuardReport>& reports, const std::vector<Buffer*>& all,
                        const std::vector<GuardedMemory*>& memory) const;
  Verdict refuse_all_zero(bool outputs) const;
  // A later launch's output against the first's (which: "nondeterministic: launch i of N ...").
  Verdict bits_differ(const Staged& s, const std::vector<uint8_t>& first, const std::string& which) const;
  Verdict row_sets_differ(const Staged& s, const std::vector<uint8_t>& first, const std::string& which) const;

  kernels::Device& device_;
  CaseSchedule schedule_;
  std::vector<Staged> staged_;
  std::vector<GuardedMemory*> guarded_;  // guard()
  std::function<void()> after_arm_;
  struct Rewrite {
    Buffer* buffer;
    std::vector<uint8_t> bytes;
  };
  std::vector<Rewrite> rewrites_;  // rewrite_after_arm
  // Whether every byte r writes lies in an output view of its buffer dense over its span.
  bool rewrite_within_outputs(const Rewrite& r) const;
  // arm_all on the device's stream, then the rewrites queued behind it.
  void arm(const std::vector<GuardedMemory*>& memory);
};

}  // namespace mlacheck
