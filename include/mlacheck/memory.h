// mlacheck's public API, part 1 of 4: memory. Views (dtype, shape, strides, byte offset) and tensors
// over them; guarded memory (red zones, poisoned outputs, a snapshot of every byte a launch must
// leave alone, a report naming the buffer, the nearest view, the row and the column of a stray
// write); the devices a kernel runs on (host, cuda, hip); staged buffers (host bytes the oracle
// reads, uploaded into guarded device memory).
//
// The public headers are include/mlacheck/{memory,oracle,cases,properties,plugin}.h, and the
// package's one target is mlacheck::mlacheck (docs/plugins.md, "The CMake package"). The headers
// they include (core/, oracle/, kernels/, harness/, properties/) are installed beside them under
// include/mlacheck/internal/ because they need them; their names and contents may change.
#pragma once

#include "core/dtype.h"
#include "core/guarded_buffer.h"
#include "core/poison.h"
#include "core/tensor.h"
#include "core/view.h"
#include "harness/staged_buffer.h"
#include "kernels/device.h"
