// Properties of decode_metadata (properties/decode_metadata_properties.h).
#include "properties/decode_metadata_properties.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/contract.h"
#include "core/error.h"
#include "core/poison.h"
#include "kernels/registry.h"
#include "oracle/decode_metadata.h"

namespace mlacheck {

using namespace kernels;

namespace {

constexpr int64_t kMaxPad = kMetadataMaxPad;  // the largest offset or row pad a step has (its schema's)
constexpr uint8_t kPoison = 0xA7; // int32 0xA7A7A7A7: a length or page read from outside a view shows

std::string str(int64_t x) { return std::to_string(x); }

// Views that address the same elements the same way: dtype, shape and offset equal, and the strides
// of every dimension that moves the address (size > 1; none when the view is empty), as PyTorch
// compares layouts.
bool same_layout(const View& a, const View& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.byte_offset() != b.byte_offset()) return false;
  if (a.numel() == 0) return true;
  for (int d = 0; d < a.rank(); ++d) {
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  }
  return true;
}

const char* path_name(MetadataPath p) {
  return p == MetadataPath::kUniform ? "uniform" : p == MetadataPath::kGeneral ? "general" : "native";
}

// An int32 buffer of `capacity` elements, all poison, holding the view v.
Buffer int32_buffer(const char* name, int64_t capacity, const View& v) {
  Buffer b(name, View::contiguous(DType::kI32, {capacity}), 0, kPoison);
  b.view = v;
  return b;
}

// Host bytes of c's inputs in buffers of the limits' capacity.
MetadataInputs make_metadata_inputs(const MetadataLimits& l, const MetadataStep& c) {
  const int64_t B = c.B(), vec_capacity = kMaxPad + l.max_requests + 3;
  const int64_t table_capacity = kMaxPad + l.max_requests * (l.block_table_width + kMaxPad) + 3;
  MetadataInputs s{int32_buffer("seq_lens", vec_capacity, View::contiguous(DType::kI32, {B}, 4 * c.seq_lens_offset)),
                   int32_buffer("decode_lens", vec_capacity, View::contiguous(DType::kI32, {B}, 4 * c.decode_lens_offset)),
                   int32_buffer("query_start_loc", vec_capacity, View::contiguous(DType::kI32, {B + 1}, 4 * c.qsl_offset)),
                   int32_buffer("block_table", table_capacity,
                                View(DType::kI32, {B, c.W}, {c.W + c.table_row_pad, 1}, 4 * c.table_offset))};
  const std::vector<int32_t> qsl = c.query_start_loc(), table = c.block_table();
  for (int64_t b = 0; b < B; ++b) {
    s.seq_lens.put<int32_t>({b}, c.seq_lens[static_cast<size_t>(b)]);
    s.decode_lens.put<int32_t>({b}, c.decode_lens[static_cast<size_t>(b)]);
    for (int64_t w = 0; w < c.W; ++w) s.table.put<int32_t>({b, w}, table[static_cast<size_t>(b * c.W + w)]);
  }
  for (int64_t b = 0; b <= B; ++b) s.qsl.put<int32_t>({b}, qsl[static_cast<size_t>(b)]);
  return s;
}

}  // namespace

MetadataResult metadata_build_ref(MetadataBuilder& builder, const MetadataBatch& batch) { return builder.build(batch); }

void stage_metadata_inputs(Device& device, const MetadataLimits& l, const MetadataStep& c, MetadataInputs& s) {
  MetadataInputs next = make_metadata_inputs(l, c);
  const std::vector<Buffer*> old = s.all(), now = next.all();
  for (size_t i = 0; i < now.size(); ++i) {
    if (old[i]->memory && old[i]->memory->size() == static_cast<int64_t>(now[i]->host.size())) {
      now[i]->memory = std::move(old[i]->memory);
      now[i]->memory->write(0, now[i]->host.data(), static_cast<int64_t>(now[i]->host.size()));
    } else {
      now[i]->upload(device);
    }
  }
  s = std::move(next);
}

MetadataBatch metadata_batch(const MetadataInputs& s, const MetadataStep& c) {
  MetadataBatch b;
  b.seq_lens = s.seq_lens.device_tensor();
  b.decode_lens = s.decode_lens.device_tensor();
  if (c.give_query_start_loc) b.query_start_loc = s.qsl.device_tensor();
  b.block_table = s.table.device_tensor();
  b.host_decode_lens = c.decode_lens;
  if (c.give_host_seq_lens) b.host_seq_lens = c.seq_lens;
  b.num_decode_tokens = c.give_num_decode_tokens ? c.T() : -1;
  b.num_padded_tokens = c.num_padded_tokens;
  b.layout = c.layout;
  b.path = c.path;
  return b;
}

std::vector<uintptr_t> metadata_buffer_addresses(MetadataBuilder& builder) {
  std::vector<uintptr_t> a;
  for (GuardedMemory* m : {&builder.seq_lens_memory(), &builder.decode_lens_memory(), &builder.block_table_memory(),
                           &builder.context_lens_memory()}) {
    a.push_back(reinterpret_cast<uintptr_t>(m));
    a.push_back(reinterpret_cast<uintptr_t>(m->data()));
  }
  return a;
}

Verdict metadata_result_as_declared(MetadataBuilder& builder, const MetadataStep& c, const MetadataResult& r,
                                    const DeviceTensor& source_table) {
  const bool flat = c.layout == MetadataLayout::kFlattened;
  if (r.layout != c.layout) return std::string("result layout is ") + (flat ? "native" : "flattened") + ", asked for the other";
  if (r.num_decode_tokens != c.T()) return "result num_decode_tokens " + str(r.num_decode_tokens) + ", want " + str(c.T());
  if (r.next_n_live != c.next_n_live()) return "result next_n_live " + str(r.next_n_live) + ", want max d = " + str(c.next_n_live());
  // A view handed out: based at its buffer's first byte, exactly the view declared, inside the buffer.
  const auto in_buffer = [](const char* name, const DeviceTensor& t, GuardedMemory& m, const View& want) -> Verdict {
    if (t.base != m.data()) return std::string(name) + " view is not based at the builder's buffer '" + m.name() + "'";
    if (!same_layout(t.view, want)) return std::string(name) + " view is " + t.view.to_string() + ", declared " + want.to_string();
    const ByteSpan span = t.view.byte_span();
    if (!span.empty() && (span.begin < 0 || span.end > m.size())) {
      return std::string(name) + " view " + t.view.to_string() + " reaches past its buffer of " + str(m.size()) + " bytes";
    }
    return std::nullopt;
  };
  const auto empty = [&](const char* name, const DeviceTensor& t) -> Verdict {
    if (t.base == nullptr) return std::nullopt;
    return std::string(name) + " view " + t.view.to_string() + " handed out in the " + (flat ? "flattened" : "native") +
           " layout, which leaves it empty";
  };
  if (flat) {
    const MetadataPath want = c.path == MetadataPathChoice::kAuto && c.uniform() ? MetadataPath::kUniform : MetadataPath::kGeneral;
    if (r.path != want) {
      return std::string("took the ") + path_name(r.path) + " path, want " + path_name(want) +
             (c.uniform() ? " (a uniform batch)" : " (a non-uniform or padded batch)");
    }
    if (r.rows != c.rows()) return "result rows " + str(r.rows) + ", want " + str(c.rows());
    const int64_t rows = c.rows(), width = builder.limits().block_table_width;
    if (Verdict v = in_buffer("seq_lens", r.seq_lens, builder.seq_lens_memory(), View::contiguous(DType::kI32, {rows}))) return v;
    if (Verdict v = in_buffer("decode_lens", r.decode_lens, builder.decode_lens_memory(), View::contiguous(DType::kI32, {rows}))) return v;
    if (Verdict v = in_buffer("block_table", r.block_table, builder.block_table_memory(),
                              View(DType::kI32, {rows, c.W}, {width, 1}))) {
      return v;
    }
    return empty("context_lens", r.context_lens);
  }
  if (r.path != MetadataPath::kNative) return std::string("took the ") + path_name(r.path) + " path in the native layout";
  const View want = View::contiguous(DType::kI32, {c.B(), c.next_n_live()});
  if (Verdict v = in_buffer("context_lens", r.context_lens, builder.context_lens_memory(), want)) return v;
  if (!r.context_lens.view.is_contiguous()) return "context_lens view " + r.context_lens.view.to_string() + " is not C-contiguous";
  if (r.block_table.base != source_table.base || !same_layout(r.block_table.view, source_table.view)) {
    return "native block_table view " + r.block_table.view.to_string() + " is not the batch's own " + source_table.view.to_string();
  }
  if (Verdict v = empty("seq_lens", r.seq_lens)) return v;
  return empty("decode_lens", r.decode_lens);
}

namespace {

std::vector<int32_t> read_all(const GuardedMemory& m) {
  std::vector<int32_t> out(static_cast<size_t>(m.size() / 4));
  m.read(0, out.data(), m.size());
  return out;
}

// The first element where got (row-major [rows, cols] with row stride got_stride) differs from want
// ([rows, cols] dense), as "name row r column c: got x, want y".
Verdict first_difference(const char* name, const int32_t* got, int64_t got_stride, const int32_t* want, int64_t rows,
                         int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int32_t g = got[r * got_stride + c], w = want[r * cols + c];
      if (g != w) {
        return std::string(name) + " row " + str(r) + (cols > 1 ? " column " + str(c) : std::string()) + ": got " +
               int32_text(g) + ", want " + str(w);
      }
    }
  }
  return std::nullopt;
}

// Every length in [0, L_b]: token t of request b is flattened row qsl[b] + t, native element (b, t).
Verdict lengths_in_range(const MetadataStep& c, const MetadataOutcome& o) {
  const std::vector<int32_t> qsl = c.query_start_loc();
  const int64_t n = c.next_n_live();
  for (int64_t b = 0; b < c.B(); ++b) {
    for (int32_t t = 0; t < c.decode_lens[static_cast<size_t>(b)]; ++t) {
      const bool flat = c.layout == MetadataLayout::kFlattened;
      const int64_t at = flat ? qsl[static_cast<size_t>(b)] + t : b * n + t;
      const int32_t x = flat ? o.seq_lens[static_cast<size_t>(at)] : o.context_lens[static_cast<size_t>(at)];
      if (x < 0 || x > c.seq_lens[static_cast<size_t>(b)]) {
        return "request " + str(b) + " token " + str(t) + ": context length " + int32_text(x) + " outside [0, L = " +
               str(c.seq_lens[static_cast<size_t>(b)]) + "]";
      }
    }
  }
  return std::nullopt;
}

// The builder's buffers against the oracle over everything allocated: the live region and zeros after.
Verdict compare_with_oracle(const MetadataLimits& l, const MetadataStep& c, MetadataInputs& s, const MetadataOutcome& o) {
  if (Verdict v = lengths_in_range(c, o)) return v;
  const oracle::DecodeBatchViews views{s.seq_lens.host_tensor(), s.decode_lens.host_tensor(), s.table.host_tensor(), l.next_n};
  if (c.layout == MetadataLayout::kFlattened) {
    const oracle::FlattenedMetadata want = oracle::flattened_metadata(views, l.max_batched_tokens);
    const int64_t rows = l.max_batched_tokens, width = l.block_table_width;
    if (Verdict v = first_difference("seq_lens", o.seq_lens.data(), 1, want.seq_lens.data(), rows, 1)) return v;
    if (Verdict v = first_difference("decode_lens", o.decode_lens.data(), 1, want.decode_lens.data(), rows, 1)) return v;
    if (Verdict v = first_difference("block_table", o.block_table.data(), width, want.block_table.data(), rows, c.W)) return v;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t w = c.W; w < width; ++w) {
        const int32_t x = o.block_table[static_cast<size_t>(r * width + w)];
        if (x != 0) return "block_table row " + str(r) + " column " + str(w) + " (past the source's " + str(c.W) + ") is " + int32_text(x) + ", not 0";
      }
    }
    return std::nullopt;
  }
  const oracle::NativeMetadata want = oracle::native_metadata(views);
  const int64_t n = want.next_n_live;
  if (Verdict v = first_difference("context_lens", o.context_lens.data(), n, want.context_lens.data(), c.B(), n)) return v;
  for (int64_t i = c.B() * n; i < l.max_requests * l.next_n; ++i) {
    const int32_t x = o.context_lens[static_cast<size_t>(i)];
    if (x != 0) return "context_lens element " + str(i) + " past the live [" + str(c.B()) + ", " + str(want.next_n_live) + "] is " + int32_text(x) + ", not 0";
  }
  return std::nullopt;
}

}  // namespace

Verdict run_metadata_step(Device& device, MetadataBuildFn* build, MetadataBuilder& builder, const MetadataStep& c,
                          MetadataInputs& s, bool against_oracle, MetadataOutcome& o) {
  const MetadataLimits& l = builder.limits();
  stage_metadata_inputs(device, l, c, s);
  GuardedMemory* flat[] = {&builder.seq_lens_memory(), &builder.decode_lens_memory(), &builder.block_table_memory()};
  GuardedMemory& native = builder.context_lens_memory();
  for (GuardedMemory* m : flat) m->clear_outputs();
  native.clear_outputs();
  // What this step may write: its live region and the tail the builder says the last steps dirtied.
  if (c.layout == MetadataLayout::kFlattened) {
    const int64_t rows = std::max(c.T(), builder.flat_dirty_rows());
    if (rows > 0) {
      flat[0]->declare_output("seq_lens rows", View::contiguous(DType::kI32, {rows}));
      flat[1]->declare_output("decode_lens rows", View::contiguous(DType::kI32, {rows}));
      flat[2]->declare_output("block_table rows", View::contiguous(DType::kI32, {rows, l.block_table_width}));
    }
  } else {
    const int64_t elements = std::max(c.B() * c.next_n_live(), builder.native_dirty_elements());
    if (elements > 0) native.declare_output("context_lens", View::contiguous(DType::kI32, {elements}));
  }
  // The inputs and the builder's four buffers in the testbed (harness/testbed.h); a refusal or a
  // replaced buffer ends the launch before any guard is read (a replaced one may be freed already).
  struct Stop {
    std::string why;
  };
  Testbed bed(device, c);
  for (Buffer* b : s.all()) bed.input(*b);
  for (GuardedMemory* m : {flat[0], flat[1], flat[2], &native}) bed.guard(*m);
  const std::vector<uintptr_t> addresses = metadata_buffer_addresses(builder);
  const MetadataBatch batch = metadata_batch(s, c);
  try {
    if (Verdict v = bed.launch([&] {
          try {
            o.result = build(builder, batch);
          } catch (const OutsideContract&) {
            throw;  // not run: the implementation cannot take this case (a contract, the interpreter's reach)
          } catch (const Error& e) {
            throw Stop{std::string("a valid batch was refused: ") + e.what()};
          }
          if (metadata_buffer_addresses(builder) != addresses) {
            throw Stop{"the builder replaced or moved a persistent buffer during a step (a captured graph keeps the old "
                       "address)"};
          }
        })) {
      return v;
    }
  } catch (const Stop& stop) {
    return stop.why;
  }
  o.seq_lens = read_all(*flat[0]);
  o.decode_lens = read_all(*flat[1]);
  o.block_table = read_all(*flat[2]);
  o.context_lens = read_all(native);
  if (Verdict v = metadata_result_as_declared(builder, c, o.result, batch.block_table)) return v;
  return against_oracle ? compare_with_oracle(l, c, s, o) : std::nullopt;
}

Verdict decode_metadata_equals_oracle(Device& device, MetadataBuildFn* build, MetadataBuilder& builder,
                                      const MetadataStep& c, MetadataOutcome* out) {
  MetadataInputs s;
  MetadataOutcome o;
  const Verdict v = run_metadata_step(device, build, builder, c, s, true, o);
  if (out != nullptr) *out = std::move(o);
  return v;
}

Verdict decode_metadata_views_as_declared(Device& device, MetadataBuildFn* build, MetadataBuilder& builder,
                                          const MetadataStep& c) {
  MetadataInputs s;
  MetadataOutcome o;
  return run_metadata_step(device, build, builder, c, s, false, o);
}

Verdict decode_metadata_fast_path_equals_general_path(Device& device, MetadataBuildFn* build, MetadataBuilder& builder,
                                                      const MetadataStep& c) {
  MLA_REQUIRE(c.uniform(), "case: fast_path_equals_general_path needs a uniform batch (every decode length equal, none 0)");
  MetadataStep general = c, fast = c;
  general.layout = fast.layout = MetadataLayout::kFlattened;
  general.give_query_start_loc = fast.give_query_start_loc = true;
  general.path = MetadataPathChoice::kGeneral;
  fast.path = MetadataPathChoice::kAuto;
  MetadataInputs s;
  MetadataOutcome g, f;
  if (Verdict v = run_metadata_step(device, build, builder, general, s, false, g)) return "general path: " + *v;
  if (Verdict v = run_metadata_step(device, build, builder, fast, s, false, f)) return "fast path: " + *v;
  const std::pair<const char*, const std::vector<int32_t>*> buffers[] = {
      {"seq_lens", &g.seq_lens}, {"decode_lens", &g.decode_lens}, {"block_table", &g.block_table}};
  const std::vector<int32_t>* fast_buffers[] = {&f.seq_lens, &f.decode_lens, &f.block_table};
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t>& a = *buffers[i].second;
    const std::vector<int32_t>& b = *fast_buffers[i];
    const auto at = std::mismatch(a.begin(), a.end(), b.begin());
    if (at.first != a.end()) {
      return std::string("fast path ") + buffers[i].first + " element " + str(at.first - a.begin()) + " is " +
             int32_text(*at.second) + ", the general path's " + int32_text(*at.first);
    }
  }
  return std::nullopt;
}

Verdict decode_metadata_layouts_agree(Device& device, MetadataBuildFn* build, MetadataBuilder& builder,
                                      const MetadataStep& c) {
  MetadataStep flat = c, native = c;
  flat.layout = MetadataLayout::kFlattened;
  flat.give_query_start_loc = true;
  native.layout = MetadataLayout::kNative;
  native.num_padded_tokens = -1;
  MetadataInputs s;
  MetadataOutcome f, n;
  if (Verdict v = run_metadata_step(device, build, builder, flat, s, false, f)) return "flattened: " + *v;
  if (Verdict v = run_metadata_step(device, build, builder, native, s, false, n)) return "native: " + *v;
  const std::vector<int32_t> qsl = c.query_start_loc(), table = c.block_table();
  const int64_t width = builder.limits().block_table_width;
  // Strides as the views say (checked equal to the contract already).
  const int64_t native_row = n.result.context_lens.view.rank() == 2 ? n.result.context_lens.view.stride(0) : 0;
  for (int64_t b = 0; b < c.B(); ++b) {
    for (int32_t t = 0; t < c.decode_lens[static_cast<size_t>(b)]; ++t) {
      const int64_t row = qsl[static_cast<size_t>(b)] + t;
      const int32_t fx = f.seq_lens[static_cast<size_t>(row)], nx = n.context_lens[static_cast<size_t>(b * native_row + t)];
      if (fx != nx) {
        return "request " + str(b) + " token " + str(t) + ": flattened row " + str(row) + " has context length " +
               int32_text(fx) + ", native element (" + str(b) + ", " + str(t) + ") " + int32_text(nx);
      }
      if (f.decode_lens[static_cast<size_t>(row)] != 1) {
        return "flattened row " + str(row) + " has decode_len " + int32_text(f.decode_lens[static_cast<size_t>(row)]) + ", not 1";
      }
      for (int64_t w = 0; w < c.W; ++w) {
        if (f.block_table[static_cast<size_t>(row * width + w)] != table[static_cast<size_t>(b * c.W + w)]) {
          return "flattened row " + str(row) + " (request " + str(b) + " token " + str(t) + ") holds another request's block-table row (column " +
                 str(w) + ": " + int32_text(f.block_table[static_cast<size_t>(row * width + w)]) + ", want " +
                 str(table[static_cast<size_t>(b * c.W + w)]) + ")";
        }
      }
    }
  }
  return std::nullopt;
}

Verdict decode_metadata_steps_equal_oracle(Device& device, MetadataBuildFn* build, MetadataBuilder& builder,
                                           const std::vector<MetadataStep>& steps) {
  const std::vector<uintptr_t> addresses = metadata_buffer_addresses(builder);
  MetadataInputs s;  // one set of input buffers, refilled every step
  for (size_t i = 0; i < steps.size(); ++i) {
    MetadataOutcome o;
    if (Verdict v = run_metadata_step(device, build, builder, steps[i], s, true, o)) return "step " + str(int64_t(i)) + ": " + *v;
    if (metadata_buffer_addresses(builder) != addresses) {
      return "step " + str(int64_t(i)) + ": a persistent buffer's address changed since the builder was made";
    }
  }
  return std::nullopt;
}

void register_decode_metadata_properties(PropertyRegistry& r) {
  const auto make = [](Device& device, const std::string& impl, const MetadataLimits& l) {
    return kernels::registry().find<MetadataBuilderFactory>(impl)(device, l);
  };
  using Step = std::pair<MetadataLimits, MetadataStep>;
  using StepVerdict = Verdict (*)(Device&, MetadataBuildFn*, MetadataBuilder&, const MetadataStep&);
  const auto one_step = [&r, make](const char* name, const char* summary, StepVerdict verdict,
                                   Step (*parse)(const CaseText&) = decode_metadata_from_text) {
    r.add(make_property<Step>(std::string("decode_metadata.") + name, "decode_metadata", summary, parse,
                              [make, verdict](Device& device, const std::string& impl, const Step& s) {
                                return verdict(device, &metadata_build_ref, *make(device, impl, s.first), s.second);
                              }));
  };
  one_step("equals_oracle",
           "every builder buffer equals the oracle after the step (tails zero), inputs untouched, views as declared",
           [](Device& d, MetadataBuildFn* b, MetadataBuilder& m, const MetadataStep& c) {
             return decode_metadata_equals_oracle(d, b, m, c);
           });
  one_step("views_as_declared",
           "every view a build returns has its declared dtype, shape and strides, inside its buffer; guards hold",
           &decode_metadata_views_as_declared);
  one_step("fast_path_equals_general_path", "a uniform batch through the fused fast path gives the general path's bytes",
           &decode_metadata_fast_path_equals_general_path, decode_metadata_uniform_from_text);
  one_step("layouts_agree", "flattened and native layouts give every token the same context length and request row",
           &decode_metadata_layouts_agree);
  using Steps = std::pair<MetadataLimits, std::vector<MetadataStep>>;
  r.add(make_property<Steps>(
      "decode_metadata.steps_equal_oracle", "decode_metadata",
      "a sequence of steps on one builder each equals the oracle; buffer addresses never change",
      decode_metadata_steps_from_text, [make](Device& device, const std::string& impl, const Steps& s) {
        return decode_metadata_steps_equal_oracle(device, &metadata_build_ref, *make(device, impl, s.first), s.second);
      }));
}

}  // namespace mlacheck
