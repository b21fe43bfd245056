// A hook of run_isolated (core/backend/isolate.h) for resources a child may take over from its
// parent: called in the parent after each child has ended and been reaped.
#pragma once

namespace mlacheck {

// Called in this process after each child run_isolated forked has ended and been reaped, with its
// pid (kernels/python_worker.cpp ends a Python worker that child took over). nullptr: none.
void set_after_isolated_child(void (*hook)(int pid));

}  // namespace mlacheck
