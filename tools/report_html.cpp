// The HTML page of a stray write (tools/report_html.h).
#include "tools/report_html.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/backend/isolate.h"
#include "core/error.h"
#include "harness/case_text.h"
#include "properties/property_registry.h"

namespace mlacheck {

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::string escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string hex(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

// The grid: element (r, c) covers the element_size bytes at base + (r * pitch + c) * element_size
// from the allocation's first data byte. For a 2-d view, grid rows and columns are the view's own.
struct Grid {
  int64_t base = 0, es = 1, pitch = 16;
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;  // the window drawn
  int64_t byte(int64_t r, int64_t c) const { return base + (r * pitch + c) * es; }
  int64_t row_of(int64_t off) const { return floor_div(floor_div(off - base, es), pitch); }
  int64_t col_of(int64_t off) const {
    const int64_t e = floor_div(off - base, es);
    return e - floor_div(e, pitch) * pitch;
  }
};

Grid make_grid(const GuardPicture& p) {
  Grid g;
  if (const PictureView* l = p.layout()) {
    const View& v = l->view;
    g.base = v.byte_offset();
    g.es = std::max<int64_t>(1, v.element_size());
    if (v.rank() >= 2 && v.stride(v.rank() - 2) > 0) {
      g.pitch = v.stride(v.rank() - 2);
    } else if (v.rank() >= 1) {
      g.pitch = std::clamp<int64_t>(v.size(v.rank() - 1), 1, 16);
      if (v.rank() == 1) g.pitch = 16;
    }
  }
  // Rows: the data, one row of red zone each side, and the strays' rows (red zones included).
  int64_t lo = g.row_of(0) - 1, hi = g.row_of(std::max<int64_t>(p.size, 1) - 1) + 1;
  lo = std::max(lo, g.row_of(-p.red_zone));
  hi = std::min(hi, g.row_of(p.size + p.red_zone - 1));
  lo = std::min(lo, g.row_of(p.first.offset));
  hi = std::max(hi, g.row_of(p.last_offset));
  const int64_t first_row = g.row_of(p.first.offset);
  if (hi - lo + 1 > kPictureMaxRows) {
    lo = std::max(lo, first_row - 8);
    hi = std::min(hi, lo + kPictureMaxRows - 1);
  }
  g.row0 = lo;
  g.rows = hi - lo + 1;
  g.cols = std::min<int64_t>(g.pitch, kPictureMaxColumns);
  if (g.pitch > kPictureMaxColumns) {
    g.col0 = std::clamp<int64_t>(g.col_of(p.first.offset) - 16, 0, g.pitch - kPictureMaxColumns);
  }
  return g;
}

// Whether byte off lies inside an element of v.
bool in_view(const View& v, int64_t off) {
  if (v.numel() == 0) return false;
  const std::vector<int64_t> c = v.coords_of_byte(off);
  for (int d = 0; d < v.rank(); ++d) {
    if (c[d] < 0 || c[d] >= v.size(d)) return false;
  }
  const int64_t start = v.byte_offset_of(c);
  return off >= start && off < start + v.element_size();
}

const StrayByte* stray_in(const GuardPicture& p, int64_t begin, int64_t end) {
  auto it = std::lower_bound(p.strays.begin(), p.strays.end(), begin,
                             [](const StrayByte& s, int64_t off) { return s.offset < off; });
  return it != p.strays.end() && it->offset < end ? &*it : nullptr;
}

// The cell of the element at [b, b + es): its class and its tooltip.
std::pair<std::string, std::string> cell(const GuardPicture& p, const Grid& g, int64_t r, int64_t c) {
  const int64_t b = g.byte(r, c), e = b + g.es;
  std::ostringstream tip;
  tip << "row " << r << ", column " << c << ": bytes " << b << ".." << e - 1;
  if (e <= -p.red_zone || b >= p.size + p.red_zone) return {"x", tip.str() + ", outside the guarded memory"};
  if (const StrayByte* s = stray_in(p, b, e)) {
    tip << ": STRAY at byte " << s->offset;
    if (s->values_known) tip << ", expected " << hex(s->expected) << ", found " << hex(s->actual);
    const bool first = p.first.offset >= b && p.first.offset < e;
    return {first ? "s f" : "s", tip.str() + (first ? " (the first stray)" : "")};
  }
  if (b < 0 || e > p.size) return {"z", tip.str() + ", red zone"};
  for (const PictureView& v : p.views) {
    for (int64_t x = b; x < e; ++x) {
      if (!in_view(v.view, x)) continue;
      if (v.output) return {"o", tip.str() + ", output view '" + v.name + "'"};
      return {"v", tip.str() + ", view '" + v.name + "' (must not change)"};
    }
  }
  return {"p", tip.str() + ", outside every view (must not change)"};
}

// Runs of adjacent stray bytes, as "bytes 48..59 (12): row 4, column 0 to row 5, column 2".
std::vector<std::string> stray_runs(const GuardPicture& p, const Grid& g, size_t most) {
  std::vector<std::string> runs;
  for (size_t i = 0; i < p.strays.size() && runs.size() < most;) {
    size_t j = i + 1;
    while (j < p.strays.size() && p.strays[j].offset == p.strays[j - 1].offset + 1) ++j;
    const int64_t a = p.strays[i].offset, z = p.strays[j - 1].offset;
    std::ostringstream os;
    os << "bytes " << a << ".." << z << " (" << z - a + 1 << "): row " << g.row_of(a) << ", column " << g.col_of(a);
    if (g.row_of(z) != g.row_of(a) || g.col_of(z) != g.col_of(a)) {
      os << " to row " << g.row_of(z) << ", column " << g.col_of(z);
    }
    runs.push_back(os.str());
    i = j;
  }
  return runs;
}

const char* kStyle = R"(body{font:14px/1.4 sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px;margin:0 0 8px}
code,.mono{font-family:monospace}
.verdict{font-family:monospace;white-space:pre-wrap;background:#f6f6f6;padding:6px;border-left:4px solid #e41a1c}
table.grid{border-collapse:separate;border-spacing:2px;border:1px solid #123456;margin:8px 0}
table.grid td{width:18px;height:18px;padding:0}
table.grid th{font:9px monospace;color:#555;font-weight:normal;padding:0 2px}
td.o{background:#9ecae1}td.v{background:#d9d9d9}td.p{background:#f4f4f4}
td.z{background:#fdd49e}td.x{background:#fff}
td.s{background:#e41a1c}td.s.f{box-shadow:inset 0 0 0 3px #000}
.legend span{display:inline-block;width:12px;height:12px;vertical-align:middle;margin:0 4px 0 12px;border:1px solid #999}
.strip{position:relative;height:14px;width:800px;background:#f4f4f4;border:1px solid #999;margin:6px 0}
.strip div{position:absolute;top:0;height:14px}
)";

}  // namespace

std::string picture_first_stray_place(const GuardPicture& p) {
  const Grid g = make_grid(p);
  const int64_t in_elem = p.first.offset - g.byte(g.row_of(p.first.offset), g.col_of(p.first.offset));
  std::ostringstream os;
  os << "row " << g.row_of(p.first.offset) << ", column " << g.col_of(p.first.offset) << ", byte " << in_elem
     << " of its " << g.es;
  return os.str();
}

std::string render_guard_picture_html(const GuardPicture& p, const std::string& context) {
  const Grid g = make_grid(p);
  const PictureView* layout = p.layout();
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>mlacheck: stray write in '"
    << escape(p.buffer) << "'</title>\n<style>" << kStyle << "</style></head><body>\n";
  h << "<h1>Stray write in buffer '" << escape(p.buffer) << "'</h1>\n";
  if (!context.empty()) h << "<p class=\"mono\">" << escape(context) << "</p>\n";
  h << "<p class=\"verdict\">" << escape(p.verdict) << "</p>\n";
  h << "<p>The first stray byte is byte <b>" << p.first.offset << "</b> of the allocation ("
    << escape(stray_region_name(p.first.region)) << "): <b>" << escape(picture_first_stray_place(p))
    << "</b> in the grid below; expected " << hex(p.first.expected) << ", found " << hex(p.first.actual) << ".";
  if (!p.first.nearest_view.empty()) {
    h << " Nearest output view: '" << escape(p.first.nearest_view) << "' <code>" << escape(p.first.view.to_string())
      << "</code>.";
  }
  h << "</p>\n<p>" << p.stray_count << " stray byte" << (p.stray_count == 1 ? "" : "s") << " in all, the last at byte "
    << p.last_offset << "; ";
  if (p.strays_complete) {
    h << "every one is marked.";
  } else {
    h << p.strays.size() << " of them are known one by one and marked (the rest lie between them"
      << (p.strays.size() >= GuardPicture::kMaxStrayBytes ? ", past the listing's cap" : ", in a red zone or a buffer too large to scan")
      << ").";
  }
  h << "</p>\n";
  h << "<p>Buffer: " << p.size << " bytes, with " << p.red_zone << " bytes of red zone on each side. Declared views:</p><ul>\n";
  for (const PictureView& v : p.views) {
    h << "<li>" << (v.output ? "output view" : "buffer view") << " '" << escape(v.name) << "' <code>"
      << escape(v.view.to_string()) << "</code>" << (v.output ? " (the launch may write it)" : " (must not change outside the outputs)")
      << "</li>\n";
  }
  if (p.views.empty()) h << "<li>none</li>\n";
  h << "</ul>\n";
  // The whole allocation as one strip: red zones, output views and strays at scale.
  const double total = static_cast<double>(p.size + 2 * p.red_zone);
  auto at = [&](int64_t off) { return 100.0 * static_cast<double>(off + p.red_zone) / total; };
  auto bar = [&](int64_t a, int64_t z, const char* colour) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "<div style=\"left:%.3f%%;width:max(1px,%.3f%%);background:#%s\"></div>", at(a),
                  at(z) - at(a), colour);
    h << buf;
  };
  h << "<p>The whole allocation (red zone | data | red zone):</p><div class=\"strip\">";
  bar(-p.red_zone, 0, "fdd49e");
  bar(p.size, p.size + p.red_zone, "fdd49e");
  for (const PictureView& v : p.views) {
    if (!v.output || v.view.numel() == 0) continue;
    const ByteSpan s = v.view.byte_span();
    bar(s.begin, s.end, "c6dbef");
  }
  for (const StrayByte& s : p.strays) bar(s.offset, s.offset + 1, "fb6a4a");
  h << "</div>\n";
  // The grid.
  h << "<p>Elements of " << g.es << " byte" << (g.es == 1 ? "" : "s") << ", " << g.pitch << " to a row";
  if (layout != nullptr) h << ", laid out as the view '" << escape(layout->name) << "'";
  h << "; rows " << g.row0 << " to " << g.row0 + g.rows - 1 << ", columns " << g.col0 << " to " << g.col0 + g.cols - 1
    << " shown. Hover an element for its bytes.</p>\n";
  h << "<p class=\"legend\"><span style=\"background:#9ecae1\"></span>output view<span style=\"background:#d9d9d9\"></span>"
       "buffer view (must not change)<span style=\"background:#f4f4f4\"></span>outside every view"
       "<span style=\"background:#fdd49e\"></span>red zone<span style=\"background:#e41a1c\"></span>stray"
       " (the first outlined)</p>\n";
  h << "<table class=\"grid\"><tr><th></th>";
  for (int64_t c = g.col0; c < g.col0 + g.cols; ++c) h << "<th>" << (c % 4 == 0 ? std::to_string(c) : "") << "</th>";
  h << "</tr>\n";
  for (int64_t r = g.row0; r < g.row0 + g.rows; ++r) {
    h << "<tr><th>" << r << "</th>";
    for (int64_t c = g.col0; c < g.col0 + g.cols; ++c) {
      const auto [cls, tip] = cell(p, g, r, c);
      h << "<td class=\"" << cls << "\" title=\"" << escape(tip) << "\"></td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
  const std::vector<std::string> runs = stray_runs(p, g, 32);
  h << "<p>Stray bytes, in runs" << (runs.size() == 32 ? " (the first 32 runs)" : "") << ":</p><ul class=\"mono\">\n";
  for (const std::string& r : runs) h << "<li>" << escape(r) << "</li>\n";
  h << "</ul>\n</body></html>\n";
  return h.str();
}

std::string write_guard_picture_html(const GuardPicture& p, const std::string& dir, const std::string& stem,
                                     const std::string& context) {
  namespace fs = std::filesystem;
  std::string name = stem.empty() ? "picture" : stem;
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) c = '-';
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  MLA_REQUIRE(fs::is_directory(dir), "--report-dir: cannot make the folder '", dir, "'",
              ec ? ": " + ec.message() : std::string());
  const std::string path = (fs::path(dir) / (name + ".html")).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << render_guard_picture_html(p, context);
  out.close();
  MLA_REQUIRE(out.good(), "--report html: cannot write '", path, "'");
  return path;
}

std::string write_picture_for_verdict(const GuardPictureSink& sink, const std::string& verdict, const std::string& dir,
                                      const std::string& stem, const std::string& context) {
  const std::optional<GuardPicture> p = sink.picture_for(verdict);
  return p ? write_guard_picture_html(*p, dir, stem, context) : std::string();
}

std::string picture_note(const std::string& path) { return path.empty() ? std::string() : "; picture: " + path; }

std::string picture_of_case(const std::string& case_text, const std::string& backend, const std::string& impl,
                            const std::string& dir, const std::string& stem, const std::string& context,
                            double timeout_seconds) {
  const CaseText c = CaseText::parse(case_text);
  IsolationOptions opts;
  opts.timeout_seconds = timeout_seconds;
  // The child writes the page and answers its path as its "verdict"; a passing rerun answers "".
  constexpr const char* kPage = "page: ";
  const IsolatedOutcome r = run_isolated(
      [&]() -> std::string {
        GuardPictureSink sink;
        ScopedGuardPictureSink on(sink);
        const ReproResult rr = run_case_text(c, backend, impl);
        if (!rr.verdict) return "";
        const std::string path = write_picture_for_verdict(sink, *rr.verdict, dir, stem, context);
        return path.empty() ? "none" : kPage + path;
      },
      opts);
  if (r.kind == IsolatedOutcome::kViolation && r.message.rfind(kPage, 0) == 0) return r.message.substr(6);
  if (r.kind == IsolatedOutcome::kViolation && r.message.rfind("error: --report", 0) == 0) throw Error(r.message.substr(7));
  return "";
}

}  // namespace mlacheck
