// Poisoning: fill the parts of a tensor a kernel must not depend on with values that make any
// dependence visible (a wrong or non-finite result), and detect results that pass only trivially.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mlacheck {

// The value an unwritten output element holds after poison_output(), as bytes per dtype: a NaN for
// every float format (fp32 0x7FA5A5A5, bf16 0x7FA5, fp16 0x7DA5, fp8 0x7F, ue8m0 0xFF) and
// 0xA5 in every byte for integers (int32 -1515870811: negative but not -1, so never a valid index).
void poison_output(const HostTensor& t);
// True when the element at p (of dtype t) still holds the output poison.
bool is_output_poison(DType t, const void* p);

// For a verdict on t after its values were widened for a comparison (which loses the poison's
// bits): " (N of M elements hold the output poison: never written)", or "" when none does.
std::string unwritten_note(const HostTensor& t);
// An int32 as a verdict shows it: the output poison (0xA5 in every byte, -1515870811) is named for
// what it is, an element the kernel never wrote; any other value is its decimal.
std::string int32_text(int32_t v);

// Sets every element of t to value (encoded for t's dtype).
void fill(const HostTensor& t, double value);

// For a [rows, cols] tensor: sets the columns at and past lengths[r] of each row r to value (NaN,
// -inf or a sentinel), so a kernel that reads past a row's length computes with it. A length below
// 0 poisons the whole row; one past cols poisons nothing.
void fill_past_lengths(const HostTensor& rows_by_cols, const std::vector<int64_t>& lengths, double value);

// CUTLASS's rule: a test whose input or output is all zeros can pass trivially. Float ±0 count as
// zero; NaN does not.
bool all_zero(const HostTensor& t);

}  // namespace mlacheck
